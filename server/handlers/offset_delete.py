"""OffsetDelete (key 47), version 0 (KIP-496).

Deletes committed offsets of an Empty group, or of topics a consumer group no longer
subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for those it does). Partitions of unknown topics
are UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetDeleteResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 47
TopicResponse = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResponse = TopicResponse.OffsetDeleteResponsePartition


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    registry = broker.topics
    wanted = []
    # With ACLs (as Kafka): Delete on the group, and Read on each topic.
    checked = broker.authorizer is not None
    if checked and authorize.group_denied(ctx, request.group_id, authorize.DELETE):
        return OffsetDeleteResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            throttle_time_ms=0,
            topics=[],
            version=0,
        )
    denied = authorize.denied_topics(ctx, authorize.READ, (t.name for t in request.topics))
    for t in request.topics:
        known = registry.get(t.name)
        if t.name in denied:
            continue
        for p in t.partitions:
            if known is not None and 0 <= p.partition_index < known.partitions:
                wanted.append((t.name, p.partition_index))

    def build(outcome: tuple[ErrorCode, list[ErrorCode]]) -> Any:
        error, errors = outcome
        decided = dict(zip(wanted, errors, strict=False))
        topics = []
        if error is ErrorCode.NONE:
            topics = [
                TopicResponse(
                    name=t.name,
                    partitions=[
                        PartitionResponse(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                            if t.name in denied
                            else decided.get(
                                (t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                            ),
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=topics, version=0)

    parked = ctx.park(build)
    broker.apply(broker.coordinator.delete_offsets(broker.now(), request.group_id, wanted), parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
