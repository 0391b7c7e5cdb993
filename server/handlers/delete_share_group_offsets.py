"""DeleteShareGroupOffsets (key 92), version 0: an empty share group forgets where it was in
the topics named (`kafka-share-groups --delete-offsets`), its next fetch of them starting where
share.auto.offset.reset says, as Kafka's GroupCoordinatorShard.initiateDeleteShareGroupOffsets:
the group must exist (GROUP_ID_NOT_FOUND) and be empty (NON_EMPTY_GROUP); a topic that does
not exist, or that the group never read, is UNKNOWN_TOPIC_OR_PARTITION. Delete on the group and
Read on each topic are needed.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import DeleteShareGroupOffsetsResponse
from minicoord.server.data.share_requests import kept_first, offsets_admin_refused
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 92
Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
UNKNOWN = "This server does not host this topic-partition."
NOTHING = "There is no offset information to delete."


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, topics: list[Any]) -> Any:
    return DeleteShareGroupOffsetsResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        responses=topics,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    group = request.group_id
    refusal = offsets_admin_refused(ctx, group, authorize.DELETE, create=False)
    if refusal is not None:
        return _answer(ctx, *refusal, [])
    shares = broker.shares
    denied = authorize.denied_topics(ctx, authorize.READ, [t.topic_name for t in request.topics])
    out = []
    for t in request.topics:
        name = t.topic_name
        topic = broker.topics.get(name)
        if name in denied and topic is not None:
            out.append(Topic(topic_name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if topic is None:
            code, why = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN
            out.append(Topic(topic_name=name, error_code=code, error_message=why))
            continue
        if topic.topic_id not in shares.topics_of(group):
            code, why = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NOTHING
            out.append(Topic(topic_name=name, error_code=code, error_message=why))
            continue
        shares.drop(lambda key, tid=topic.topic_id: key[0] != group or key[1] != tid)
        out.append(Topic(topic_name=name, topic_id=topic.topic_id, error_code=ErrorCode.NONE))
    return kept_first(ctx, _answer(ctx, ErrorCode.NONE, None, out))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
