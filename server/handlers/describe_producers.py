"""DescribeProducers (key 61), version 0: each partition's active idempotent producers.

Kafka's KafkaApis.handleDescribeProducersRequest (KIP-664), topic by topic: an illegal name is
INVALID_TOPIC_EXCEPTION with Topic.validate's words; then Read on the topic, else
TOPIC_AUTHORIZATION_FAILED; then a topic the cluster does not have is
UNKNOWN_TOPIC_OR_PARTITION. Each of those is given to every partition asked for, with the
error's own message (ApiError(error)). A partition the topic does not have is
UNKNOWN_TOPIC_OR_PARTITION with no message (ReplicaManager.getPartitionOrError); one still
loading NOT_LEADER_OR_FOLLOWER, a log that failed to open KAFKA_STORAGE_ERROR.

A partition's producers are its ProducerStates, as UnifiedLog.activeProducers lists Kafka's:
epoch, the last batch's last sequence and (max) timestamp. Without transactions the
coordinator epoch and the current transaction's start offset are always -1, as Kafka reports
an idempotent producer's. Kafka lists them from a HashMap keyed by producer id, which for the
small ids a broker hands out iterates in id order; so does this.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.data.plane import PartitionState
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import topic_name_error

API_KEY = 61
SPEC = SPECS[API_KEY]
TopicResponse = SPEC.response.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState
# A producer with no transaction open in the partition.
NO_TXN_START_OFFSET = -1


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    topics = []
    for t in request.topics:
        name = t.name
        error: ErrorCode | None = None
        message = topic_name_error(name)
        if message is not None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif not authorize.allowed(ctx, authorize.READ, authorize.TOPIC, name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        elif (topic := broker.topics.get(name)) is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            message = "This server does not host this topic-partition."
        partitions = []
        for index in t.partition_indexes:
            if error is not None:
                partitions.append(_failed(index, error, message))
            elif not 0 <= index < topic.partitions:
                partitions.append(_failed(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif (state := broker.data.partition(topic, index)) is None:
                partitions.append(_failed(index, broker.data.error_for(topic, index)))
            else:
                partitions.append(_producers(index, state))
        topics.append(TopicResponse(name=name, partitions=partitions))
    return SPEC.response(version=ctx.version, throttle_time_ms=0, topics=topics)


def _failed(index: int, error: ErrorCode, message: str | None = None) -> Any:
    return PartitionResponse(
        partition_index=index, error_code=error, error_message=message, active_producers=[]
    )


def _producers(index: int, state: PartitionState) -> Any:
    active = []
    for pid, entry in sorted(state.producers.producers.items()):
        active.append(
            ProducerState(
                producer_id=pid,
                producer_epoch=entry.epoch,
                last_sequence=entry.last_sequence,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=state.txns.open.get(pid, NO_TXN_START_OFFSET),
            )
        )
    return PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.NONE,
        error_message=None,
        active_producers=active,
    )


HANDLER = Handler.for_spec(SPEC, handle)
