"""Offsets committed inside a transaction (TxnOffsetCommit), pending until it ends.

Kafka writes them to `__consumer_offsets` at once, in the producer's transaction, and a
marker there makes them the group's committed offsets or drops them. Here they wait in memory
and are written as the group's ordinary offset commits when the transaction commits, before
its EndTxn is answered: what is durable and what OffsetFetch answers are the same. A restart
aborts every open transaction, so pending offsets need not outlive one.
"""

from __future__ import annotations

from collections.abc import Callable

from minicoord.server.coordinator.offsets import CommittedOffset, OffsetsManager, TopicPartition
from minicoord.server.coordinator.results import Effects


class PendingTxnOffsets:
    __slots__ = ("pending",)

    def __init__(self) -> None:
        # group id -> producer id -> partition -> offset.
        self.pending: dict[str, dict[int, dict[TopicPartition, CommittedOffset]]] = {}

    def add(
        self, group_id: str, producer_id: int, tp: TopicPartition, offset: CommittedOffset
    ) -> None:
        self.pending.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = offset

    def unstable(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of this partition (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        by_producer = self.pending.get(group_id)
        return bool(by_producer) and any(tp in offsets for offsets in by_producer.values())

    def complete(
        self,
        fx: Effects,
        offsets: OffsetsManager,
        partition_for: Callable[[str], int],
        group_id: str,
        producer_id: int,
        commit: bool,
    ) -> int:
        """The transaction ended: its offsets become the group's (commit) or are dropped."""
        by_producer = self.pending.get(group_id)
        if not by_producer:
            return 0
        taken = by_producer.pop(producer_id, None) or {}
        if not by_producer:
            del self.pending[group_id]
        if commit:
            partition = partition_for(group_id)
            for (topic, index), o in taken.items():
                offsets.commit(
                    fx.records, partition, group_id, topic, index, o.offset, o.leader_epoch,
                    o.metadata, o.commit_timestamp,
                )  # fmt: skip
        return len(taken)
