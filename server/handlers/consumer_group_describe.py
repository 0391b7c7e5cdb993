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


def handle(ctx: RequestContext, request: Any) -> Any:
    groups = []
    names = list(request.group_ids)
    # With ACLs (as Kafka): Describe on each group, else GROUP_AUTHORIZATION_FAILED for it.
    checked = ctx.broker.authorizer is not None
    denied = {g for g in names if authorize.group_denied(ctx, g, authorize.DESCRIBE)}
    with_ops = checked and request.include_authorized_operations
    for g in denied:
        groups.append(
            Group(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                error_message=None,
                group_id=g,
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
                members=[],
                authorized_operations=authorize.NOT_COMPUTED,
            )
        )
    for d in ctx.broker.coordinator.consumer_group_describe([g for g in names if g not in denied]):
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
