"""Committed offsets per group: OffsetCommit, OffsetFetch, OffsetDelete storage and records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.protocol.records import (
    Record,
    expiring_offset_commit_value,
    offset_commit_key,
    offset_commit_value,
)
from minicoord.server.coordinator.results import Effects

if TYPE_CHECKING:
    from minicoord.server.coordinator.txn_offsets import PendingTxnOffsets

TopicPartition = tuple[str, int]


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # When it expires, if its commit said (OffsetCommit v2-4's retention time): then that
    # decides, not the group's retention (Kafka's OffsetExpirationConditionImpl).
    expire_timestamp: int | None = None

    def expired(self, base_timestamp: int, retention_ms: int, now: int) -> bool:
        """Whether it has expired, `base_timestamp` being when its retention started."""
        if self.expire_timestamp is not None:
            return now >= self.expire_timestamp
        return base_timestamp + retention_ms <= now


class OffsetsManager:
    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # Offsets of open transactions (TxnOffsetCommit), once there has been one: a deletion
        # takes those of its partitions too, as Kafka's tombstone does.
        self.pending: PendingTxnOffsets | None = None

    def commit(
        self,
        records: list[tuple[int, Record]],
        partition: int,
        group_id: str,
        topic: str,
        index: int,
        offset: int,
        leader_epoch: int,
        metadata: str,
        now: int,
        expire_timestamp: int | None = None,
    ) -> None:
        group = self.offsets.get(group_id)
        if group is None:
            group = self.offsets[group_id] = {}
        if expire_timestamp is None:
            group[(topic, index)] = CommittedOffset(offset, leader_epoch, metadata, now)
            value = offset_commit_value(offset, leader_epoch, metadata, now)
        else:
            group[(topic, index)] = CommittedOffset(offset, -1, metadata, now, expire_timestamp)
            value = expiring_offset_commit_value(offset, metadata, now, expire_timestamp)
        # Appended to the caller's list of records to persist (Effects.records, or the
        # broker's pending records on the one-partition path).
        records.append((partition, Record(offset_commit_key(group_id, topic, index), value)))

    def restore(self, group_id: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        """Set an offset from a replayed record (it is already persisted)."""
        self.offsets.setdefault(group_id, {})[tp] = committed

    def forget_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)

    def get(self, group_id: str, tp: TopicPartition) -> CommittedOffset | None:
        group = self.offsets.get(group_id)
        return group.get(tp) if group else None

    def all_for(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self.offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def in_transaction(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of the partition for the group."""
        return self.pending is not None and self.pending.unstable(group_id, tp)

    def delete(self, fx: Effects, partition: int, group_id: str, tp: TopicPartition) -> bool:
        """Delete the group's offset of the partition, and those open transactions hold (one
        tombstone for both, as Kafka writes it); False if there was neither."""
        group = self.offsets.get(group_id)
        pending = self.pending
        held = pending is not None and pending.discard(group_id, tp)
        if not group or tp not in group:
            if not held:
                return False
        else:
            del group[tp]
            if not group:
                del self.offsets[group_id]
        fx.persist(partition, Record(offset_commit_key(group_id, tp[0], tp[1]), None))
        return True

    def delete_group(self, fx: Effects, partition: int, group_id: str) -> int:
        group = self.offsets.pop(group_id, None) or {}
        held = self.pending.discard_group(group_id) if self.pending is not None else []
        for topic, index in [*group, *(tp for tp in held if tp not in group)]:
            fx.persist(partition, Record(offset_commit_key(group_id, topic, index), None))
        return len(group)
