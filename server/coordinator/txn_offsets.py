"""Offsets committed inside a transaction (TxnOffsetCommit), pending until it ends.

As Kafka's group coordinator keeps them: the TxnOffsetCommit writes its offset commit records
to the group's `__consumer_offsets` partition at once, as a transactional batch of the
producer's, and the transaction's marker there makes them the group's committed offsets or
drops them (OffsetMetadataManager's pendingTransactionalOffsets and
replayEndTransactionMarker). Until then they wait here, by producer id, and OffsetFetch with
require_stable answers UNSTABLE_OFFSET_COMMIT for their partitions.

A committed one becomes the group's offset unless the group's offset of that partition was
committed after it (Kafka compares the records' offsets): an OffsetCommit that came after the
TxnOffsetCommit, or another transaction's offset written after it and committed first. So the
state the server serves is the one replaying the log (replay.py), or its compacted copy,
gives back.
"""

from __future__ import annotations

from minicoord.server.coordinator.offsets import CommittedOffset, OffsetsManager, TopicPartition

GroupPartition = tuple[str, TopicPartition]
# The offset, its record's offset in the group's offsets partition, and the group's
# committed offset of the partition when it was written (what a later commit replaces).
Pending = tuple[CommittedOffset, int, CommittedOffset | None]


class PendingTxnOffsets:
    __slots__ = ("by_producer", "materialized")

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[GroupPartition, Pending]] = {}
        # Offsets a committed transaction made the group's, with their records' offsets, kept
        # only while another open transaction holds one for the same partition (which, if
        # written later, must still replace it).
        self.materialized: dict[GroupPartition, tuple[CommittedOffset, int]] = {}

    def add(
        self,
        producer_id: int,
        group_id: str,
        tp: TopicPartition,
        offset: CommittedOffset,
        record_offset: int,
        current: CommittedOffset | None,
    ) -> None:
        """A TxnOffsetCommit's offset, its record at `record_offset`; `current` is the group's
        committed offset of the partition now."""
        entries = self.by_producer.get(producer_id)
        if entries is None:
            entries = self.by_producer[producer_id] = {}
        entries[(group_id, tp)] = (offset, record_offset, current)

    def unstable(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of this partition (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        key = (group_id, tp)
        return any(key in entries for entries in self.by_producer.values())

    def discard(self, group_id: str, tp: TopicPartition) -> bool:
        """The partition's offset was deleted for the group: the open transactions' offsets of
        it go too (Kafka's tombstone removes them); whether there were any."""
        key = (group_id, tp)
        held = False
        for entries in self.by_producer.values():
            held = entries.pop(key, None) is not None or held
        self.materialized.pop(key, None)
        return held

    def discard_group(self, group_id: str) -> list[TopicPartition]:
        """The group was deleted: the partitions whose pending offsets went with it."""
        tps = {tp for entries in self.by_producer.values() for g, tp in entries if g == group_id}
        for tp in tps:
            self.discard(group_id, tp)
        return sorted(tps)

    def held_for_topic(self, topic: str) -> set[GroupPartition]:
        """The (group, partition) pairs of a topic open transactions hold offsets for."""
        return {
            key for entries in self.by_producer.values() for key in entries if key[1][0] == topic
        }

    def holds_group(self, group_id: str) -> bool:
        return any(g == group_id for entries in self.by_producer.values() for g, _ in entries)

    def complete(self, offsets: OffsetsManager, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended (its marker is written): its offsets become the
        groups' (commit) or are dropped; returns how many it held."""
        taken = self.by_producer.pop(producer_id, None)
        if not taken:
            return 0
        if commit:
            materialized = self.materialized
            for key, (offset, at, before) in taken.items():
                group_id, tp = key
                current = offsets.get(group_id, tp)
                earlier = materialized.pop(key, None)
                # Replaced unless the group's offset was written after it: by a commit
                # (`before` is gone), or by a transaction that wrote later and committed first.
                # (A deletion after it took it out of the transaction: see `discard`.)
                if current is before or (
                    earlier is not None and earlier[0] is current and earlier[1] < at
                ):
                    offsets.restore(group_id, tp, offset)
                    current, earlier = offset, (offset, at)
                if earlier is not None and earlier[0] is current and self.unstable(group_id, tp):
                    materialized[key] = earlier
        return len(taken)
