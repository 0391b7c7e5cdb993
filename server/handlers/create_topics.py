"""CreateTopics (key 19), versions 2-7 (Kafka 4 dropped 0-1).

v1 added validate-only; v5 is flexible and returns the created topic's partition count,
replication factor and configs; v7 its topic id. With one broker, a replication factor
above 1 is INVALID_REPLICATION_FACTOR, as Kafka would answer.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import CreateTopicsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 19
_ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    registry = ctx.broker.topics
    default_partitions = ctx.broker.config.num_partitions
    names = [t.name for t in request.topics]
    results = []
    for topic in request.topics:
        partitions = topic.num_partitions
        if topic.assignments:
            partitions = len(topic.assignments)
        elif partitions == -1:
            partitions = default_partitions
        error, message = ErrorCode.NONE, None
        if names.count(topic.name) > 1:
            error, message = ErrorCode.INVALID_REQUEST, "topic named more than once in the request"
        elif topic.replication_factor not in (-1, 1):
            error = ErrorCode.INVALID_REPLICATION_FACTOR
            message = f"replication factor {topic.replication_factor} exceeds the 1 broker here"
        else:
            error, message = registry.check_new(topic.name, partitions)
        topic_id = _ZERO_UUID
        if error is ErrorCode.NONE and not request.validate_only:
            topic_id = registry.create(topic.name, partitions).topic_id
        ok = error is ErrorCode.NONE
        results.append(
            CreateTopicsResponse.CreatableTopicResult(
                name=topic.name,
                topic_id=topic_id,
                error_code=error,
                error_message=message,
                num_partitions=partitions if ok else -1,
                replication_factor=1 if ok else -1,
                configs=[] if ok else None,
            )
        )
    return CreateTopicsResponse(version=ctx.version, throttle_time_ms=0, topics=results)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
