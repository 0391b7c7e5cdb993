"""ShareGroupHeartbeat (key 76), version 1: KIP-932's share groups.

A member joins (epoch 0, with its own id and a subscription), heartbeats, or leaves (-1); the
answer carries its epoch, the heartbeat interval and, on a join, a full request or a change,
the partitions it may fetch from (server/coordinator/share/groups.py). With `share.version` at
0 every request is UNSUPPORTED_VERSION, as Kafka answers with share groups off. Nothing is
written: share groups live in memory.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import ShareGroupHeartbeatResponse
from minicoord.server.coordinator.share.groups import ShareGroupError
from minicoord.server.features import SHARE_VERSION
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 76
GROUP_DENIED = "Group authorization failed."


def _error(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    return ShareGroupHeartbeatResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        member_id=None,
        member_epoch=0,
        heartbeat_interval_ms=0,
        assignment=None,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if broker.features.level(SHARE_VERSION) < 1:
        return _error(ctx, ErrorCode.UNSUPPORTED_VERSION)
    if broker.authorizer is not None:
        if authorize.group_denied(ctx, request.group_id):
            return _error(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED, GROUP_DENIED)
        if request.subscribed_topic_names and authorize.denied_topics(
            ctx, authorize.DESCRIBE, request.subscribed_topic_names
        ):
            return _error(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    error = broker.coordinator.unavailable(request.group_id)
    if error is not None:
        return _error(ctx, error)
    topics = request.subscribed_topic_names
    try:
        outcome = broker.coordinator.shares.heartbeat(
            broker.now(),
            request.group_id,
            request.member_id,
            request.member_epoch,
            request.rack_id,
            None if topics is None else list(topics),
            ctx.client_id,
            ctx.channel.client_host,
        )
    except ShareGroupError as exc:
        return _error(ctx, exc.error, exc.message)
    broker.rearm()  # the member's session timer
    assignment = None
    if outcome.assignment is not None:
        Assignment = ShareGroupHeartbeatResponse.Assignment
        assignment = Assignment(
            topic_partitions=[
                Assignment.TopicPartitions(topic_id=topic_id, partitions=list(parts))
                for topic_id, parts in outcome.assignment.items()
            ]
        )
    return ShareGroupHeartbeatResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        member_id=outcome.member_id,
        member_epoch=outcome.epoch,
        heartbeat_interval_ms=outcome.interval_ms,
        assignment=assignment,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
