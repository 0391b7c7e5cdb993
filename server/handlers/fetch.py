"""Fetch (key 1), versions 4-18.

No data path yet: every partition is empty, so a consumer positioned at offset 0 is held for
the request's max wait (a long poll, as on an idle Kafka topic) and gets no records; any other
position is OFFSET_OUT_OF_RANGE, which sends the client through its auto.offset.reset policy
exactly as an empty Kafka partition would. Fetch sessions (v7+) are declined with session id
0, which clients treat as "send full fetches". v13+ name topics by id.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import FetchResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 1
# A client asking for a longer wait is still answered within this bound, so a stuck
# consumer never pins a parked reply for minutes.
MAX_WAIT_CAP_MS = 30_000
TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData


def handle(ctx: RequestContext, request: Any) -> Any:
    registry = ctx.broker.topics
    by_id = ctx.version >= 13
    responses = []
    any_error = False
    for t in request.topics:
        known = registry.by_id(t.topic_id) if by_id else registry.get(t.topic)
        missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partitions = []
        for p in t.partitions:
            if known is None or not 0 <= p.partition < known.partitions:
                error = missing
            elif p.fetch_offset != 0:
                error = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                error = ErrorCode.NONE
            any_error = any_error or error is not ErrorCode.NONE
            partitions.append(
                PartitionData(
                    partition_index=p.partition,
                    error_code=error,
                    high_watermark=0 if known else -1,
                    last_stable_offset=0 if known else -1,
                    log_start_offset=0 if known else -1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    # Zero-length, not null: Kafka sends MemoryRecords.EMPTY for a partition
                    # with nothing to return (error or not), and kafka-python's fetcher hands
                    # this field to MemoryRecords, which fails on None (len(None)).
                    records=b"",
                )
            )
        responses.append(TopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=partitions))
    response = FetchResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=responses,
    )
    wait_ms = min(max(request.max_wait_ms, 0), MAX_WAIT_CAP_MS)
    if any_error or wait_ms == 0:
        return response
    parked = ctx.park(lambda _: response)
    ctx.broker.call_later(wait_ms, lambda: parked.resolve(None))
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
