"""OffsetForLeaderEpoch (key 23), versions 2-4.

Clients validate their positions with it after a leader change. Every batch here was written
in the one leader epoch (0), so that epoch ends at the log end offset; a later epoch is
unknown (-1/-1), as Kafka answers. v3 adds the replica id (ignored, as Kafka does); v4 is
flexible. The client's current leader epoch is checked (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetForLeaderEpochResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.data.plane import OffsetAnswer
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 23
TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    topics = []
    # With ACLs (as Kafka, KIP-320): ClusterAction on the cluster, else Describe per topic.
    denied: set[str] = set()
    if broker.authorizer is not None and not authorize.cluster_allowed(
        ctx, authorize.Operation.CLUSTER_ACTION
    ):
        denied = authorize.denied_topics(ctx, authorize.DESCRIBE, (t.topic for t in request.topics))
    for t in request.topics:
        topic = broker.topics.get(t.topic)
        partitions = []
        for p in t.partitions:
            if t.topic in denied:
                answer = OffsetAnswer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif topic is None or not 0 <= p.partition < topic.partitions:
                answer = OffsetAnswer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                answer = broker.data.end_offset_for_epoch(
                    topic, p.partition, p.leader_epoch, p.current_leader_epoch
                )
            partitions.append(
                EpochEndOffset(
                    error_code=answer.error,
                    partition=p.partition,
                    leader_epoch=answer.leader_epoch,
                    end_offset=answer.offset,
                )
            )
        topics.append(TopicResult(topic=t.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(version=ctx.version, throttle_time_ms=0, topics=topics)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
