"""Produce (key 0), versions 3-13: advertised so that clients enable their v2 message format,
answered with an error because minicoord stores no records (a data path is separate work).

Why serve it at all: librdkafka (confluent-kafka, kcat) turns on its "MsgVer2" feature only
when a broker offers Produce v3+ and Fetch v4+, and without it refuses every Fetch locally and
retries in a tight loop, burning a CPU in the consumer. Each produced partition is answered
INVALID_REQUEST with a message saying why (v8+), so a producer fails at once and clearly; an
unknown topic is UNKNOWN_TOPIC_OR_PARTITION as usual. With acks=0 nothing is answered, as
Kafka does.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import ProduceResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import NO_RESPONSE, Handler, RequestContext

API_KEY = 0
NOT_STORED = "minicoord is a group coordinator and stores no records"
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse


def handle(ctx: RequestContext, request: Any) -> Any:
    if request.acks == 0:
        return NO_RESPONSE
    registry = ctx.broker.topics
    by_id = ctx.version >= 13
    responses = []
    for t in request.topic_data:
        known = registry.by_id(t.topic_id) if by_id else registry.get(t.name)
        partitions = []
        for p in t.partition_data:
            if known is None or not 0 <= p.index < known.partitions:
                error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
            else:
                error, message = ErrorCode.INVALID_REQUEST, NOT_STORED
            partitions.append(
                PartitionResponse(
                    index=p.index,
                    error_code=error,
                    base_offset=-1,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                    record_errors=[],
                    error_message=message,
                )
            )
        responses.append(
            TopicResponse(name=t.name, topic_id=t.topic_id, partition_responses=partitions)
        )
    return ProduceResponse(version=ctx.version, responses=responses, throttle_time_ms=0)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
