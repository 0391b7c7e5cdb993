"""AddPartitionsToTxn (key 24), versions 0-3: a producer adds partitions to its transaction.

As Kafka's KafkaApis and TransactionCoordinator answer a client: with ACLs, Write on the
transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each
topic (TOPIC_AUTHORIZATION_FAILED; the others OPERATION_NOT_ATTEMPTED); unknown partitions
UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED; then the coordinator's one
error for them all. v3 is flexible; v4 and later batch transactions for brokers verifying a
Produce (KIP-890), which a single node does itself, and are not served.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddPartitionsToTxnResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.transactions.answers import after_writes, compatible

API_KEY = 24
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    tid = request.v3_and_below_transactional_id
    asked = [(t.name, list(t.partitions)) for t in request.v3_and_below_topics]

    def answer(errors: dict[tuple[str, int], ErrorCode]) -> Any:
        return AddPartitionsToTxnResponse(
            version=version,
            throttle_time_ms=0,
            results_by_topic_v3_and_below=[
                TopicResult(
                    name=name,
                    results_by_partition=[
                        PartitionResult(partition_index=i, partition_error_code=errors[name, i])
                        for i in dict.fromkeys(indexes)
                    ],
                )
                for name, indexes in asked
            ],
        )

    every = [(name, i) for name, indexes in asked for i in indexes]
    if broker.authorizer is not None:
        if not authorize.allowed(ctx, authorize.WRITE, authorize.TRANSACTIONAL_ID, tid):
            return answer(dict.fromkeys(every, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        denied = authorize.denied_topics(ctx, authorize.WRITE, (name for name, _ in asked))
        if denied:
            return answer(
                {
                    tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if tp[0] in denied
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in every
                }
            )
    unknown = set()
    for name, i in every:
        topic = broker.topics.get(name)
        if topic is None or topic.internal or not 0 <= i < topic.partitions:
            unknown.add((name, i))
    if unknown:
        return answer(
            {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if tp in unknown
                else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in every
            }
        )
    error = broker.transactions.add_partitions(
        tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, every,
        broker.now(),
    )  # fmt: skip
    error = compatible(error, version, 2)
    return after_writes(ctx, Result(None, [], []), lambda _: answer(dict.fromkeys(every, error)))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=3)
