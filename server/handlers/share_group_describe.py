"""ShareGroupDescribe (key 77), version 1: share groups as Kafka describes them (state,
epochs, the `simple` assignor, and per member its client, subscription and assignment), with
the group's authorized operations when asked. An id that is no share group is
GROUP_ID_NOT_FOUND."""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import ShareGroupDescribeResponse
from minicoord.server.coordinator.share.groups import ASSIGNOR
from minicoord.server.features import SHARE_VERSION
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 77
Group = ShareGroupDescribeResponse.DescribedGroup
Member = Group.Member


def _refused(group_id: str, error: ErrorCode, message: str | None = None) -> Any:
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


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    enabled = broker.features.level(SHARE_VERSION) >= 1
    coordinator = broker.coordinator
    topics = broker.topics
    out = []
    for gid in request.group_ids:
        if not enabled:
            out.append(_refused(gid, ErrorCode.UNSUPPORTED_VERSION))
            continue
        if authorize.group_denied(ctx, gid, authorize.DESCRIBE):
            out.append(_refused(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        error = coordinator.unavailable(gid)
        if error is not None:
            out.append(_refused(gid, error))
            continue
        group = coordinator.share_group(gid)
        if group is None:
            message = (
                f"Group {gid} is not a share group."
                if gid in coordinator.groups.groups
                else f"Group {gid} not found."
            )
            out.append(_refused(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        Assignment = Member.Assignment
        members = []
        for m in group.members.values():
            parts = []
            for topic_id, indexes in m.assignment.items():
                topic = topics.by_id(topic_id)
                parts.append(
                    Assignment.TopicPartitions(
                        topic_id=topic_id,
                        topic_name=topic.name if topic is not None else "",
                        partitions=list(indexes),
                    )
                )
            members.append(
                Member(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed),
                    assignment=Assignment(topic_partitions=parts),
                )
            )
        out.append(
            Group(
                error_code=ErrorCode.NONE,
                error_message=None,
                group_id=gid,
                group_state=group.state,
                group_epoch=group.epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=ASSIGNOR,
                members=members,
                authorized_operations=authorize.authorized_operations(ctx, ResourceType.GROUP, gid)
                if request.include_authorized_operations
                else authorize.NOT_COMPUTED,
            )
        )
    return ShareGroupDescribeResponse(version=ctx.version, throttle_time_ms=0, groups=out)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
