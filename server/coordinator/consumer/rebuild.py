"""A KIP-848 consumer group rebuilt from its `__consumer_offsets` records (replay.py gathers
them). Its own module so that loading a partition with no consumer group in it does not load
the consumer protocol."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from minicoord.server.coordinator.consumer.group import (
    ClassicProtocols,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    ResolvedRegex,
)

if TYPE_CHECKING:
    from minicoord.server.coordinator.replay import ConsumerGroupRecords


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
            frozenset(value.topics), value.resolved_version, value.timestamp
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
