"""ListOffsets (key 2), versions 1-11.

Per partition: latest (-1) is the high watermark, earliest (-2) and earliest-local (-4) the
log start offset, max-timestamp (-3, v7+) the first record with the largest timestamp, a
timestamp the first record at or after it; latest-tiered (-5, v9+) and
earliest-pending-upload (-6, v11+) are -1 with no tiered storage, as Kafka answers. A special
timestamp this version does not know is UNSUPPORTED_VERSION. v2 adds the isolation level
(without transactions both levels read the same); v4 leader epochs; v6 is flexible; v10 a
timeout (for tiered lookups only).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kafka.protocol.consumer import ListOffsetsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.data.plane import OffsetAnswer
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 2
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = TopicResponse.ListOffsetsPartitionResponse


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    registry = broker.topics
    topics = []
    # isolation_level (v2+): 1 is READ_COMMITTED.
    read_committed = version >= 2 and request.isolation_level == 1
    # With ACLs (as Kafka): Describe on each topic, checked before whether it exists.
    denied = authorize.denied_topics(ctx, authorize.DESCRIBE, (t.name for t in request.topics))
    # A partition asked for twice, in one topic entry or in two of the same name, gets
    # INVALID_REQUEST at each, before whether it exists (ListOffsetsRequest.duplicatePartitions).
    asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    for t in request.topics:
        topic = registry.get(t.name)
        partitions = []
        for p in t.partitions:
            index = p.partition_index
            if t.name in denied:
                answer = OffsetAnswer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif asked[t.name, index] > 1:
                answer = OffsetAnswer(ErrorCode.INVALID_REQUEST)
            elif topic is None or not 0 <= index < topic.partitions:
                answer = OffsetAnswer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                epoch = p.current_leader_epoch if version >= 4 else -1
                answer = broker.data.list_offset(
                    topic, index, p.timestamp, epoch, version, read_committed
                )
            partitions.append(
                PartitionResponse(
                    partition_index=index,
                    error_code=answer.error,
                    timestamp=answer.timestamp,
                    offset=answer.offset,
                    leader_epoch=answer.leader_epoch,
                )
            )
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
