"""What ConsumerGroupDescribe answers for a group (Kafka's ConsumerGroup#asDescribedGroup)."""

from __future__ import annotations

import uuid
from dataclasses import field
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.coordinator.consumer import targets
from minicoord.server.coordinator.consumer.group import Assignment, ConsumerGroup

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager

# (topic id, topic name, partitions), for topics that exist.
DescribedAssignment = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    regex: str | None
    assignment: DescribedAssignment
    target: DescribedAssignment
    member_type: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[DescribedConsumerMember, ...] = field(default_factory=tuple)


def _named(assignment: Assignment, topics: targets.TopicsView) -> DescribedAssignment:
    out = []
    for topic_id, parts in sorted(assignment.items()):
        topic = topics.by_id(topic_id)
        if topic is not None and parts:
            out.append((topic_id, topic.name, tuple(sorted(parts))))
    return tuple(out)


def describe_consumer_group(
    consumers: ConsumerGroupManager, group_id: str
) -> ConsumerGroupDescription:
    # The manager's dict holds classic groups too: one id, one group.
    group = consumers.groups.get(group_id)
    if group is None:
        return ConsumerGroupDescription(
            group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        )
    if not isinstance(group, ConsumerGroup):
        return ConsumerGroupDescription(
            group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
        )
    topics = consumers.topics
    members = []
    for m in group.members.values():
        # What the member keeps, as Kafka's ConsumerGroupMember#asConsumerGroupDescribeMember
        # describes it: partitions it has still to revoke are not listed.
        members.append(
            DescribedConsumerMember(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.epoch,
                m.client_id,
                m.client_host,
                tuple(sorted(m.topics)),
                m.regex or None,
                _named(m.assigned, topics),
                _named(group.target.get(m.member_id, {}), topics),
                CLASSIC_MEMBER if m.uses_classic else CONSUMER_MEMBER,
            )
        )
    return ConsumerGroupDescription(
        group_id,
        ErrorCode.NONE,
        None,
        group.state.value,
        group.epoch,
        group.assignment_epoch,
        targets.preferred_assignor(group, consumers.default_assignor),
        tuple(members),
    )
