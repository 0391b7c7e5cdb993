"""ShareAcknowledge (key 79), versions 1-2: acknowledgements of records a share-group member
was given, in its share session, without fetching (server/data/shares.py).

Epoch 0 is refused (INVALID_SHARE_SESSION_EPOCH: a session is opened by a fetch); -1 applies
the acknowledgements and closes the session, and the records the member still holds go back
to the group (librdkafka closes this way). Every partition acknowledged is answered. v2 adds
renewing locks (type 4, with IsRenewAck) and the lock duration in the answer.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import ShareAcknowledgeResponse
from minicoord.server.data.share_requests import (
    acknowledgements,
    apply_acknowledgements,
    kept_first,
    refusal,
    refused,
)
from minicoord.server.data.shares import FINAL_EPOCH, INITIAL_EPOCH, SessionError
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 79
Topic = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
Partition = Topic.PartitionData


def _top(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    return refusal(ShareAcknowledgeResponse, ctx, error, message)


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    refusal = refused(ctx, request)
    if refusal is not None:
        return _top(ctx, *refusal)
    group, member = request.group_id, request.member_id
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return _top(
            ctx,
            ErrorCode.INVALID_SHARE_SESSION_EPOCH,
            "A share session cannot be opened by an acknowledgement.",
        )
    shares = broker.shares
    try:
        shares.session(group, member, epoch, ctx.channel)
    except SessionError as exc:
        return _top(ctx, exc.error, exc.message)
    renew = ctx.version >= 2 and request.is_renew_ack
    acked = apply_acknowledgements(
        broker, ctx, group, member, acknowledgements(request.topics), renew, broker.now()
    )
    if epoch == FINAL_EPOCH:
        shares.close(group, member)
    broker.rearm()
    broker_id = broker.config.broker_id
    by_topic: dict[Any, list[Any]] = {}
    for (topic_id, index), (error, message) in acked.items():
        leader = (broker_id, 0) if error is ErrorCode.NONE else (-1, -1)
        by_topic.setdefault(topic_id, []).append(
            Partition(
                partition_index=index,
                error_code=error,
                error_message=message,
                current_leader=Partition.LeaderIdAndEpoch(
                    leader_id=leader[0], leader_epoch=leader[1]
                ),
            )
        )
    response = ShareAcknowledgeResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        acquisition_lock_timeout_ms=shares.lock_ms_of(group),
        responses=[Topic(topic_id=t, partitions=parts) for t, parts in by_topic.items()],
        node_endpoints=[],
    )
    return kept_first(ctx, response)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
