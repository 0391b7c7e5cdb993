"""ConsumerGroupDescribe (key 69), versions 0-1: consumer-protocol groups as Kafka describes
them (state, group and assignment epochs, the server assignor, and per member its
subscription, current and target assignment). v1 adds each member's type (0 classic, 1
consumer). Authorized operations are not computed (INT32_MIN, "not requested")."""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.consumer_group_apis import ConsumerGroupDescribeResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.consumer.describe import DescribedAssignment
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 69
GROUP = ResourceType.GROUP
_TOPICS = "The group has described topic(s) that the client is not authorized to describe."
Group = ConsumerGroupDescribeResponse.DescribedGroup
Member = Group.Member
Assignment = Member.Assignment
TopicPartitions = Assignment.TopicPartitions


def _assignment(described: DescribedAssignment) -> Any:
    return Assignment(
        topic_partitions=[
            TopicPartitions(topic_id=t, topic_name=name, partitions=list(parts))
            for t, name, parts in described
        ]
    )


def _refused(group_id: str, error: ErrorCode, message: str | None) -> Any:
    return Group(
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
        authorized_operations=authorize.NOT_COMPUTED,
    )


def _hidden_topics(ctx: RequestContext, d: Any) -> set[str]:
    """The topics in the group's members' assignments (current or target) that one may not
    describe; as Kafka's handleConsumerGroupDescribe, not the topics merely subscribed to."""
    names: set[str] = set()
    for m in d.members:
        names.update(name for _, name, _ in m.assignment)
        names.update(name for _, name, _ in m.target)
    return authorize.denied_topics(ctx, authorize.DESCRIBE, names)


def handle(ctx: RequestContext, request: Any) -> Any:
    groups = []
    names = list(request.group_ids)
    if not ctx.broker.consumer_protocol:
        # As KafkaApis without the consumer protocol: every group, the bare error.
        groups = [_refused(g, ErrorCode.UNSUPPORTED_VERSION, None) for g in names]
        return ConsumerGroupDescribeResponse(version=ctx.version, throttle_time_ms=0, groups=groups)
    # With ACLs (as Kafka): Describe on each group, else GROUP_AUTHORIZATION_FAILED for it.
    checked = ctx.broker.authorizer is not None
    # A list, so that refused groups are answered in the order they were asked for.
    denied = [g for g in names if authorize.group_denied(ctx, g, authorize.DESCRIBE)]
    # Without ACLs, every operation a group supports (as Kafka's authorizedOperations).
    with_ops = request.include_authorized_operations
    for g in denied:
        groups.append(_refused(g, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
    for d in ctx.broker.coordinator.consumer_group_describe([g for g in names if g not in denied]):
        if checked and d.error is ErrorCode.NONE and _hidden_topics(ctx, d):
            # As Kafka 4.0 (KAFKA-18813): a group naming a topic one may not describe is
            # not described at all.
            groups.append(_refused(d.group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, _TOPICS))
            continue
        groups.append(
            Group(
                error_code=d.error,
                error_message=d.message,
                group_id=d.group_id,
                group_state=d.state,
                group_epoch=d.epoch,
                assignment_epoch=d.assignment_epoch,
                assignor_name=d.assignor,
                members=[
                    Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.topics),
                        subscribed_topic_regex=m.regex,
                        assignment=_assignment(m.assignment),
                        target_assignment=_assignment(m.target),
                        member_type=m.member_type,
                    )
                    for m in d.members
                ],
                authorized_operations=authorize.authorized_operations(ctx, GROUP, d.group_id)
                if with_ops and d.error is ErrorCode.NONE
                else authorize.NOT_COMPUTED,
            )
        )
    return ConsumerGroupDescribeResponse(version=ctx.version, throttle_time_ms=0, groups=groups)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
