"""AddPartitionsToTxn (key 24), versions 0-3: a producer adds partitions to its transaction.

As Kafka's KafkaApis and TransactionCoordinator answer a client: with ACLs, Write on the
transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED); then each
partition: TOPIC_AUTHORIZATION_FAILED without Write on its topic or for an internal topic
(authorizer or not), UNKNOWN_TOPIC_OR_PARTITION for one that does not exist, and if any
failed, OPERATION_NOT_ATTEMPTED for the rest; else the coordinator's one error for them all.
v3 is flexible; v4 and later batch transactions for brokers verifying a Produce (KIP-890),
which a single node does itself, and are not served.
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
    if broker.authorizer is not None and not authorize.allowed(
        ctx, authorize.WRITE, authorize.TRANSACTIONAL_ID, tid
    ):
        return answer(dict.fromkeys(every, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    denied = (
        authorize.denied_topics(ctx, authorize.WRITE, (name for name, _ in asked))
        if broker.authorizer is not None
        else set()
    )
    failed: dict[tuple[str, int], ErrorCode] = {}
    for name, i in every:
        topic = broker.topics.get(name)
        if name in denied or (topic is not None and topic.internal):
            # Kafka leaves the internal topics out of the authorized ones, authorizer or not.
            failed[name, i] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or not 0 <= i < topic.partitions:
            failed[name, i] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        return answer({tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in every})
    error = broker.transactions.add_partitions(
        tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, every,
        broker.now(),
    )  # fmt: skip
    broker.persist_transactions()
    error = compatible(error, version, 2)
    return after_writes(ctx, Result(None, [], []), lambda _: answer(dict.fromkeys(every, error)))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=3)
