"""DescribeTransactions (key 65), version 0: the state of transactional ids.

Kafka's KafkaApis.handleDescribeTransactionsRequest, id by id, each answered in the order
asked (a repeated id too): Describe on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then TransactionCoordinator.handleDescribeTransactions:
an empty id is INVALID_REQUEST, an id the coordinator has no metadata for (no InitProducerId
since the server started) TRANSACTIONAL_ID_NOT_FOUND. (Kafka answers NOT_COORDINATOR instead
while its `__transaction_state` topic does not exist; a client never sees that, since it first
looks the coordinator up, which creates the topic.) An error leaves every other field at its
schema default, as Kafka leaves it: empty state, zeros, no topics. A known id: its state, timeout,
the start of its open transaction (-1 when none), producer id and epoch, and the partitions
of the open transaction, a group added by AddOffsetsToTxn as its `__consumer_offsets`
partition, as Kafka adds it.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.transactions.coordinator import Txn

API_KEY = 65
SPEC = SPECS[API_KEY]
TransactionState = SPEC.response.TransactionState
TopicData = TransactionState.TopicData


def handle(ctx: RequestContext, request: Any) -> Any:
    states = []
    for tid in request.transactional_ids:
        if not authorize.allowed(ctx, authorize.DESCRIBE, authorize.TRANSACTIONAL_ID, tid):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not tid:
            error = ErrorCode.INVALID_REQUEST
        else:
            txn = ctx.broker.transactions.get(tid)
            if txn is not None:
                states.append(_described(ctx, txn))
                continue
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        states.append(
            TransactionState(
                error_code=error,
                transactional_id=tid,
                transaction_state="",
                transaction_timeout_ms=0,
                transaction_start_time_ms=0,
                producer_id=0,
                producer_epoch=0,
                topics=[],
            )
        )
    return SPEC.response(version=ctx.version, throttle_time_ms=0, transaction_states=states)


def _described(ctx: RequestContext, txn: Txn) -> Any:
    partitions: dict[str, list[int]] = {}
    for name, index in sorted(txn.partitions):
        partitions.setdefault(name, []).append(index)
    return TransactionState(
        error_code=ErrorCode.NONE,
        transactional_id=txn.transactional_id,
        transaction_state=txn.state,
        transaction_timeout_ms=txn.timeout_ms,
        # The last transaction's start, whatever the state since (Kafka's in-memory
        # txnStartTimestamp: -1 only for an id that never began one, or read back Empty).
        transaction_start_time_ms=txn.start_ms,
        producer_id=txn.producer_id,
        producer_epoch=txn.epoch,
        topics=[
            TopicData(topic=name, partitions=sorted(set(indexes)))
            for name, indexes in partitions.items()
        ],
    )


HANDLER = Handler.for_spec(SPEC, handle)
