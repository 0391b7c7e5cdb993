"""DescribeTransactions (key 65), version 0: the state of transactional ids.

Kafka's KafkaApis.handleDescribeTransactionsRequest, id by id, each answered in the order
asked (a repeated id too): Describe on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then TransactionCoordinator.handleDescribeTransactions:
an empty id is INVALID_REQUEST, an id the coordinator has no metadata for
TRANSACTIONAL_ID_NOT_FOUND. minicoord serves no transactions, so every other id is
TRANSACTIONAL_ID_NOT_FOUND, as a single-node Kafka answers an id no producer ever used. (Kafka
answers NOT_COORDINATOR instead while its `__transaction_state` topic does not exist; a client
never sees that, since it first looks the coordinator up, which creates the topic.) An error
leaves every other field at its schema default, as Kafka leaves it: empty state, zeros, no
topics.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 65
SPEC = SPECS[API_KEY]
TransactionState = SPEC.response.TransactionState


def handle(ctx: RequestContext, request: Any) -> Any:
    states = []
    for tid in request.transactional_ids:
        if not authorize.allowed(ctx, authorize.DESCRIBE, authorize.TRANSACTIONAL_ID, tid):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not tid:
            error = ErrorCode.INVALID_REQUEST
        else:
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


HANDLER = Handler.for_spec(SPEC, handle)
