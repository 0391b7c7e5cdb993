"""Rebuilding coordinator state from `__consumer_offsets` records (at start, per partition).

Records are the source of truth: replaying a partition's log must give the state the
coordinator had when it wrote them. Offset commits written in a transaction (TxnOffsetCommit)
wait for its marker, as Kafka's replayEndTransactionMarker takes them: a commit marker makes
them the group's unless the group's offset was written after them, an abort marker drops them,
and those of a transaction with no marker yet are left in `open_txns`.

A group with members comes back Stable at its generation, with its leader, protocol, members
and assignments; its members get a fresh session (as Kafka does), so members that keep
heartbeating carry on without a rebalance and members that never come back are expired by
their session timeouts.
"""

from __future__ import annotations

import logging
from dataclasses import field
from typing import Any

from minicoord.protocol import consumer_records as cr
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.protocol.records import UnknownRecordType, decode_key, decode_value, record_type
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.offsets import CommittedOffset
from minicoord.server.coordinator.state import GroupState

log = logging.getLogger("minicoord.loading")


class PartitionReplay:
    """One partition's records, the latest value per key winning.

    Only the surviving value of each key is decoded (in `decode`), so replaying a long
    uncompacted log costs a dict write per record rather than a decode.
    """

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.latest: dict[bytes, bytes | None] = {}
        self.records = 0
        self.groups: dict[str, Any] = {}
        self.offsets: dict[tuple[str, str, int], CommittedOffset] = {}
        self.consumer_groups: dict[str, ConsumerGroupRecords] = {}
        # Transactional records by producer id, waiting for their marker: key -> (value,
        # the record's offset).
        self.open_txns: dict[int, dict[bytes, tuple[bytes | None, int]]] = {}
        # The offset of the latest record of each key a transaction has written: what a
        # committed transactional record must be newer than to replace it.
        self._written_at: dict[bytes, int] = {}

    def add(self, key: bytes, value: bytes | None, offset: int = -1) -> None:
        self.records += 1
        self.latest[key] = value
        if self._written_at and key in self._written_at:
            self._written_at[key] = offset
            if value is None:
                # A deletion takes the open transactions' offsets of the key too.
                for records in self.open_txns.values():
                    records.pop(key, None)

    def add_transactional(
        self, producer_id: int, key: bytes, value: bytes | None, offset: int
    ) -> None:
        self.records += 1
        self.open_txns.setdefault(producer_id, {})[key] = (value, offset)
        self._written_at.setdefault(key, -1)

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's marker: its records replace the keys' values written before them,
        or are dropped."""
        taken = self.open_txns.pop(producer_id, None)
        if not taken or not commit:
            return
        latest, written_at = self.latest, self._written_at
        for key, (value, offset) in taken.items():
            if written_at[key] < offset:
                latest[key] = value
                written_at[key] = offset

    def pending_offsets(
        self, producer_id: int
    ) -> list[tuple[str, tuple[str, int], CommittedOffset, int, bool]]:
        """The offsets of the producer's transaction still open at the log's end: (group,
        partition, offset, its record's offset, whether a later commit replaced it)."""
        from minicoord.protocol.classic_records import OffsetCommitKey

        out = []
        for key, (value, offset) in self.open_txns.get(producer_id, {}).items():
            decoded = decode_key(key)
            if value is None or not isinstance(decoded, OffsetCommitKey):
                continue
            v = decode_value(decoded, value)
            committed = CommittedOffset(
                v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp
            )
            tp = (decoded.topic, decoded.partition)
            out.append((decoded.group, tp, committed, offset, self._written_at[key] > offset))
        return out

    def decode(self) -> None:
        """Decode the surviving records into `groups` and `offsets` (tombstoned keys drop out)."""
        # Imported here: the generated record classes are built on first use, not at start.
        from minicoord.protocol.classic_records import OffsetCommitKey

        unknown: dict[int, int] = {}
        for key, value in self.latest.items():
            if value is None:
                continue
            rtype = record_type(key)
            try:
                decoded = decode_key(key)
            except UnknownRecordType:
                # As Kafka's loader: skipped with a warning (a later version's record, say,
                # left by an aborted upgrade). Any other record that fails to decode fails
                # the partition's load.
                unknown[rtype] = unknown.get(rtype, 0) + 1
                continue
            v = decode_value(decoded, value)
            if rtype in cr.TYPES:
                records = self.consumer_groups.setdefault(decoded.group_id, ConsumerGroupRecords())
                records.add(rtype, decoded, v)
                continue
            if isinstance(decoded, OffsetCommitKey):
                tp_key = (decoded.group, decoded.topic, decoded.partition)
                # Only a version 1 value has an expire timestamp (-1 for the others).
                expire = v.expire_timestamp
                self.offsets[tp_key] = CommittedOffset(
                    v.offset,
                    v.leader_epoch,
                    v.metadata or "",
                    v.commit_timestamp,
                    None if expire == -1 else expire,
                )
            else:
                self.groups[decoded.group] = v
        self.latest = {}
        for rtype, count in sorted(unknown.items()):
            log.warning(
                "offsets partition %d: %d records of unknown type %d ignored",
                self.partition,
                count,
                rtype,
            )


def rebuild_group(group_id: str, partition: int, value: Any, now: int) -> Group:
    group = Group(group_id, partition, now)
    group.in_log = True
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    if value.current_state_timestamp is not None and value.current_state_timestamp >= 0:
        group.state_timestamp = value.current_state_timestamp
    for m in value.members:
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            protocols=[(value.protocol or "", bytes(m.subscription))],
            last_heartbeat=now,
            assignment=bytes(m.assignment),
        )
        group.add(member)
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    # Loading is not a transition: the group resumes where its records left it.
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group


@dataclass(slots=True)
class ConsumerGroupRecords:
    """The surviving records of one consumer group, by type."""

    epoch: Any = None
    partition_metadata: bool = False
    members: dict[str, Any] = field(default_factory=dict)
    target_epoch: Any = None
    targets: dict[str, Any] = field(default_factory=dict)
    current: dict[str, Any] = field(default_factory=dict)
    regexes: dict[str, Any] = field(default_factory=dict)

    def add(self, rtype: int, key: Any, value: Any) -> None:
        if rtype == 3:
            self.epoch = value
        elif rtype == 4:
            self.partition_metadata = True
        elif rtype == 5:
            self.members[key.member_id] = value
        elif rtype == 6:
            self.target_epoch = value
        elif rtype == 7:
            self.targets[key.member_id] = value
        elif rtype == 8:
            self.current[key.member_id] = value
        elif rtype == 16:
            self.regexes[key.regular_expression] = value
