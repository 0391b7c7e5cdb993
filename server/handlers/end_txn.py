"""EndTxn (key 26), versions 0-4: commit or abort the producer's transaction.

The coordinator's answer (TransactionCoordinator.endTransaction, transaction version 1): a
retry of the EndTxn that completed the transaction is NONE; the other way round, or with no
transaction open, INVALID_TXN_STATE; one still writing its markers, CONCURRENT_TRANSACTIONS.
On success the transaction ends in Kafka's two steps (transactions/finish.py: the prepared
record, then the markers in every partition of the transaction, which commit or drop its
offsets, then the completed record), and the answer waits until all are durable: a committed
transaction is readable by read_committed consumers when its producer learns it committed.
With ACLs: Write on the transactional id. v3 is flexible; v5 (transaction version 2, an epoch
bump with every transaction) is not served.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import EndTxnResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.transactions.answers import after_writes, compatible

API_KEY = 26


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker

    def answer(error: ErrorCode) -> Any:
        return EndTxnResponse(version=version, throttle_time_ms=0, error_code=error)

    tid = request.transactional_id
    if broker.authorizer is not None and not authorize.allowed(
        ctx, authorize.WRITE, authorize.TRANSACTIONAL_ID, tid
    ):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error, ended = broker.transactions.end_txn(
        tid, request.producer_id, request.producer_epoch, request.committed, broker.now()
    )
    error = compatible(error, version, 2)
    if ended is None:
        return after_writes(ctx, Result(None, [], []), lambda _: answer(error))
    parked = ctx.park(lambda _: answer(error))
    broker.end_transaction(ended, parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=4)
