"""AlterShareGroupOffsets (key 91), version 0: an empty share group's partitions start again
at the offsets given, nothing in flight (`kafka-share-groups --reset-offsets --execute`), as
Kafka's GroupMetadataManager.alterShareGroupOffsets: the group is made if there is none, one
with members is NON_EMPTY_GROUP, an id another kind of group holds GROUP_ID_NOT_FOUND, an
unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. Read on the group and on each topic
is needed.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import AlterShareGroupOffsetsResponse
from minicoord.server.data.share_requests import kept_first, offsets_admin_refused
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 91
Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
Partition = Topic.AlterShareGroupOffsetsResponsePartition
UNKNOWN = "This server does not host this topic-partition."


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, topics: list[Any]) -> Any:
    return AlterShareGroupOffsetsResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        responses=topics,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    group = request.group_id
    refusal = offsets_admin_refused(ctx, group, authorize.READ, create=True)
    if refusal is not None:
        return _answer(ctx, *refusal, [])
    shares = broker.shares
    denied = authorize.denied_topics(ctx, authorize.READ, [t.topic_name for t in request.topics])
    out = []
    for t in request.topics:
        topic = broker.topics.get(t.topic_name)
        if t.topic_name in denied or topic is None:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic is not None else None
            out.append(
                Topic(
                    topic_name=t.topic_name,
                    partitions=[
                        Partition(
                            partition_index=p.partition_index,
                            error_code=code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=None if code else UNKNOWN,
                        )
                        for p in t.partitions
                    ],
                )
            )
            continue
        parts = []
        for p in t.partitions:
            if 0 <= p.partition_index < topic.partitions:
                shares.start_at(group, topic.topic_id, p.partition_index, p.start_offset)
                parts.append(Partition(partition_index=p.partition_index, error_code=0))
            else:
                parts.append(
                    Partition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=UNKNOWN,
                    )
                )
        out.append(Topic(topic_name=t.topic_name, topic_id=topic.topic_id, partitions=parts))
    return kept_first(ctx, _answer(ctx, ErrorCode.NONE, None, out))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
