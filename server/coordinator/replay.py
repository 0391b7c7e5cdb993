"""Rebuilding coordinator state from `__consumer_offsets` records (at start, per partition).

Records are the source of truth: replaying a partition's log must give the state the
coordinator had when it wrote them. A group with members comes back Stable at its
generation, with its leader, protocol, members and assignments; its members get a fresh
session (as Kafka does), so members that keep heartbeating carry on without a rebalance and
members that never come back are expired by their session timeouts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from minicoord.protocol import consumer_records as cr
from minicoord.protocol.records import decode_key, decode_value, record_type
from minicoord.server.coordinator.consumer.group import (
    ClassicProtocols,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    ResolvedRegex,
)
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.offsets import CommittedOffset
from minicoord.server.coordinator.state import GroupState


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

    def add(self, key: bytes, value: bytes | None) -> None:
        self.records += 1
        self.latest[key] = value

    def decode(self) -> None:
        """Decode the surviving records into `groups` and `offsets` (tombstoned keys drop out)."""
        # Imported here: the generated record classes are built on first use, not at start.
        from minicoord.protocol.classic_records import OffsetCommitKey

        for key, value in self.latest.items():
            if value is None:
                continue
            rtype = record_type(key)
            decoded = decode_key(key)
            v = decode_value(decoded, value)
            if rtype in cr.TYPES:
                records = self.consumer_groups.setdefault(decoded.group_id, ConsumerGroupRecords())
                records.add(rtype, decoded, v)
                continue
            if isinstance(decoded, OffsetCommitKey):
                tp_key = (decoded.group, decoded.topic, decoded.partition)
                self.offsets[tp_key] = CommittedOffset(
                    v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp
                )
            else:
                self.groups[decoded.group] = v
        self.latest = {}


def rebuild_group(group_id: str, partition: int, value: Any, now: int) -> Group:
    group = Group(group_id, partition, now)
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
            protocol_type=value.protocol_type,
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


def _assignment(topics: Any) -> dict[uuid.UUID, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics or () if t.partitions}


def rebuild_consumer_group(
    group_id: str, partition: int, records: ConsumerGroupRecords
) -> ConsumerGroup | None:
    """A consumer group from its records; None when its epoch record is gone (deleted)."""
    if records.epoch is None:
        return None
    group = ConsumerGroup(group_id, partition)
    group.epoch = records.epoch.epoch
    group.metadata_hash = records.epoch.metadata_hash or 0
    group.legacy_partition_metadata = records.partition_metadata
    group.assignment_epoch = (
        records.target_epoch.assignment_epoch if records.target_epoch is not None else -1
    )
    if records.target_epoch is not None:
        group.assignment_timestamp = records.target_epoch.assignment_timestamp
    for regex, value in records.regexes.items():
        group.regexes[regex] = ResolvedRegex(
            frozenset(value.topics), value.version, value.timestamp
        )
    for member_id, meta in records.members.items():
        classic = meta.classic_member_metadata
        member = ConsumerMember(
            member_id,
            instance_id=meta.instance_id,
            rack_id=meta.rack_id,
            client_id=meta.client_id,
            client_host=meta.client_host,
            topics=frozenset(meta.subscribed_topic_names or ()),
            regex=meta.subscribed_topic_regex or "",
            rebalance_timeout_ms=meta.rebalance_timeout_ms,
            server_assignor=meta.server_assignor,
            classic=None
            if classic is None
            else ClassicProtocols(
                classic.session_timeout_ms,
                tuple((p.name, bytes(p.metadata)) for p in classic.supported_protocols),
            ),
        )
        current = records.current.get(member_id)
        if current is not None:
            member.epoch = current.member_epoch
            member.previous_epoch = current.previous_member_epoch
            try:
                member.state = MemberState(current.state)
            except ValueError:
                member.state = MemberState.UNKNOWN
            member.assigned = _assignment(current.assigned_partitions)
            member.pending = _assignment(current.partitions_pending_revocation)
        group.put(member)
    for member_id, value in records.targets.items():
        if member_id in group.members:
            group.target[member_id] = _assignment(value.topic_partitions)
    # The subscribed topics may have changed while the coordinator was down: the first
    # heartbeat compares the metadata hash (an unchanged group carries on, no new epoch).
    group.refresh = True
    return group
