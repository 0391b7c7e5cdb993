"""DeleteRecords (key 21), versions 0-2.

Moves a partition's log start offset: records below it are gone for every reader (a fetch
below it is OFFSET_OUT_OF_RANGE), segments wholly below it are deleted, and the new start is
checkpointed before the answer, so it holds across a restart. Offset -1 means the high
watermark; beyond it is OFFSET_OUT_OF_RANGE. Internal topics refuse (INVALID_TOPIC_EXCEPTION),
and so do compact-only topics (POLICY_VIOLATION), as in Kafka. v2 is flexible.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteRecordsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 21
TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    topics = []
    # With ACLs (as Kafka): Delete on each topic, checked before whether it exists.
    denied = authorize.denied_topics(ctx, authorize.DELETE, (t.name for t in request.topics))
    for t in request.topics:
        topic = broker.topics.get(t.name)
        partitions = []
        for p in t.partitions:
            if t.name in denied:
                error, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            elif topic is None or not 0 <= p.partition_index < topic.partitions:
                error, low = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            else:
                error, low, _message = broker.data.delete_records(
                    topic, p.partition_index, p.offset
                )
            partitions.append(
                PartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=error
                )
            )
        topics.append(TopicResult(name=t.name, partitions=partitions))
    return DeleteRecordsResponse(version=ctx.version, throttle_time_ms=0, topics=topics)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
