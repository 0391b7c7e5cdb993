"""Groups as an operator reads them: `minicoord ctl groups` and `minicoord ctl describe`.

Plain data (dicts of str, int, list) built from the live coordinator and data plane, on the
event loop, so the control API can send it as JSON and the CLI can print it as tables. Lag is
what `kafka-consumer-groups --describe` shows: the partition's log end offset (its high
watermark: what a read_uncommitted consumer can reach) minus the group's committed offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minicoord.server.coordinator.consumer.group import Assignment, ConsumerGroup
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.state import GroupState

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

Partitions = dict[str, list[int]]  # topic name -> partition numbers


def group_type(group: Group | ConsumerGroup) -> str:
    return "consumer" if isinstance(group, ConsumerGroup) else "classic"


def generation(group: Group | ConsumerGroup) -> int:
    """The classic generation, or the consumer group's epoch: what a rebalance moves on."""
    return group.epoch if isinstance(group, ConsumerGroup) else group.generation_id


def list_groups(broker: Broker) -> list[dict[str, Any]]:
    """Every group, sorted by id, with its type, state, member count and total lag."""
    out = []
    groups = broker.coordinator.groups.groups
    for gid in sorted(groups):
        group = groups[gid]
        offsets = _offsets(broker, group, {})
        lags = [o["lag"] for o in offsets if o["lag"] is not None]
        out.append(
            {
                "group": gid,
                "type": group_type(group),
                "state": group.state.value,
                "members": len(group.members),
                "generation": generation(group),
                "protocol": _protocol(broker, group),
                "partitions_committed": sum(1 for o in offsets if o["committed"] is not None),
                "lag": sum(lags) if lags else None,
            }
        )
    return out


def describe_group(broker: Broker, group_id: str) -> dict[str, Any] | None:
    """One group's members, assignments, committed offsets and lag; None if it does not exist."""
    group = broker.coordinator.groups.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        return None
    members = _members(broker, group)
    owner = {
        (topic, p): m["member_id"]
        for m in members
        for topic, parts in m["assignment"].items()
        for p in parts
    }
    offsets = _offsets(broker, group, owner)
    lags = [o["lag"] for o in offsets if o["lag"] is not None]
    described: dict[str, Any] = {
        "group": group_id,
        "type": group_type(group),
        "state": group.state.value,
        "generation": generation(group),
        "protocol": _protocol(broker, group),
        "coordinator_partition": broker.coordinator.partition_for(group_id),
        "members": members,
        "offsets": offsets,
        "lag": sum(lags) if lags else None,
    }
    if isinstance(group, ConsumerGroup):
        described["assignment_epoch"] = group.assignment_epoch
    else:
        described["protocol_type"] = group.protocol_type or ""
        described["leader"] = group.leader_id
    return described


def _protocol(broker: Broker, group: Group | ConsumerGroup) -> str:
    """The classic group's chosen assignor, or the consumer group's server-side assignor."""
    if isinstance(group, ConsumerGroup):
        from minicoord.server.coordinator.consumer import targets

        return targets.preferred_assignor(group, broker.coordinator.consumers.default_assignor)
    return group.protocol_name or ""


def _members(broker: Broker, group: Group | ConsumerGroup) -> list[dict[str, Any]]:
    out = []
    if isinstance(group, ConsumerGroup):
        for m in group.members.values():
            owned: Assignment = dict(m.assigned)
            for topic_id, parts in m.pending.items():
                owned[topic_id] = owned.get(topic_id, frozenset()) | parts
            out.append(
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "host": m.client_host,
                    "protocol": "classic" if m.uses_classic else "consumer",
                    "epoch": m.epoch,
                    "assignment": _named(broker, owned),
                    "target": _named(broker, group.target.get(m.member_id, {})),
                }
            )
        return out
    # As Kafka's describe: a classic assignment is shown once the group has settled on it.
    settled = group.state is GroupState.STABLE and group.protocol_type == "consumer"
    for m in group.members.values():
        out.append(
            {
                "member_id": m.member_id,
                "instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "protocol": "classic",
                "assignment": _classic_assignment(m.assignment) if settled else {},
            }
        )
    return out


def _named(broker: Broker, assignment: Assignment) -> Partitions:
    out: Partitions = {}
    for topic_id, parts in assignment.items():
        topic = broker.topics.by_id(topic_id)
        if topic is not None and parts:
            out[topic.name] = sorted(parts)
    return dict(sorted(out.items()))


def _classic_assignment(data: bytes) -> Partitions:
    """A consumer-protocol member's assignment bytes; {} when they are not that schema."""
    if not data:
        return {}
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    try:
        decoded = ConsumerProtocolAssignment.decode(data)
    except Exception:  # opaque bytes of another protocol type (Connect, Streams...)
        return {}
    out: Partitions = {}
    for tp in decoded.assigned_partitions or ():
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def _offsets(
    broker: Broker, group: Group | ConsumerGroup, owner: dict[tuple[str, int], str]
) -> list[dict[str, Any]]:
    """Committed and assigned partitions, with log end offset and lag where both are known."""
    committed = broker.coordinator.offsets.all_for(group.group_id)
    keys = sorted(set(committed) | set(owner))
    out = []
    for topic_name, index in keys:
        entry = committed.get((topic_name, index))
        end = _log_end(broker, topic_name, index)
        offset = entry.offset if entry is not None else None
        # Unclamped, as kafka-consumer-groups prints it: a commit past the end reads negative.
        lag = end - offset if end is not None and offset is not None else None
        out.append(
            {
                "topic": topic_name,
                "partition": index,
                "committed": offset,
                "log_end": end,
                "lag": lag,
                "member": owner.get((topic_name, index)),
                "metadata": entry.metadata if entry is not None else None,
            }
        )
    return out


def _log_end(broker: Broker, topic_name: str, index: int) -> int | None:
    state = broker.data.partitions.get((topic_name, index))
    return state.log.high_watermark if state is not None else None
