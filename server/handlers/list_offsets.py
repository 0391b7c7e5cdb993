"""ListOffsets (key 2), versions 1-11.

There is no data path yet, so every partition is empty: the earliest and latest offsets are
0, and a lookup by timestamp finds no record (offset -1), as Kafka answers for an empty log.
v2 adds the isolation level; v4 leader epochs; v6 is flexible; v10 a timeout.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 2
# Special timestamps: latest, earliest, earliest-local and latest-tiered all mean offset 0
# on an empty partition; max-timestamp (-3) and real timestamps find no record.
_BOUNDARY = {-1, -2, -4, -5}
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = TopicResponse.ListOffsetsPartitionResponse


def handle(ctx: RequestContext, request: Any) -> Any:
    registry = ctx.broker.topics
    topics = []
    for t in request.topics:
        known = registry.get(t.name)
        partitions = []
        for p in t.partitions:
            index = p.partition_index
            if known is None or not 0 <= index < known.partitions:
                error, offset = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            else:
                error = ErrorCode.NONE
                offset = 0 if p.timestamp in _BOUNDARY else -1
            partitions.append(
                PartitionResponse(
                    partition_index=index,
                    error_code=error,
                    timestamp=-1,
                    offset=offset,
                    leader_epoch=0 if error is ErrorCode.NONE else -1,
                )
            )
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return ListOffsetsResponse(version=ctx.version, throttle_time_ms=0, topics=topics)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
