"""InitProducerId (key 22), versions 0-5 (v6, two-phase commit, is unstable in Kafka).

For an idempotent producer (no transactional id) every call gets a fresh producer id with
epoch 0, whatever id and epoch it sends, as Kafka's coordinator answers; epoch bumps of an
idempotent producer are the client's own (KIP-360). Ids come from blocks claimed in the
cluster metadata log before use, so none is handed out twice, restarts included. A
transactional id gets its id and the next epoch from the transaction coordinator
(transactions/coordinator.py), which fences the id's earlier producer and aborts its open
transaction first. v2 is flexible; v3 carries the producer's id and epoch; v4
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before it); v5 TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.request_log import refused
from minicoord.server.security import authorize
from minicoord.server.transactions.answers import after_writes, compatible

API_KEY = 22


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version

    def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
        return InitProducerIdResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error,
            producer_id=producer_id,
            producer_epoch=epoch,
        )

    if ctx.broker.authorizer is not None:
        # As Kafka: Write on the transactional id; an idempotent producer needs
        # IdempotentWrite on the cluster or (Kafka 3+) Write on some topic.
        tid = request.transactional_id
        if tid is not None:
            if not authorize.allowed(ctx, authorize.WRITE, authorize.TRANSACTIONAL_ID, tid):
                return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not authorize.idempotent_write_allowed(ctx):
            return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if version >= 3 and (request.producer_id == -1) != (request.producer_epoch == -1):
        refused(ctx, ErrorCode.INVALID_REQUEST, "producer id and epoch must be both set or unset")
        return answer(ErrorCode.INVALID_REQUEST)
    broker = ctx.broker
    tid = request.transactional_id
    if tid is not None:
        if not tid:
            refused(ctx, ErrorCode.INVALID_REQUEST, "empty transactional id")
            return answer(ErrorCode.INVALID_REQUEST)
        now = broker.now()
        pid, epoch = (request.producer_id, request.producer_epoch) if version >= 3 else (-1, -1)
        outcome = broker.transactions.init_producer_id(
            tid, request.transaction_timeout_ms, pid, epoch, now
        )
        error = compatible(outcome.error, version, 4)

        def build(_: Any) -> Any:
            return answer(error, outcome.producer_id, outcome.epoch)

        if outcome.aborted is not None:
            # The fenced producer's transaction is aborted first; the answer (retry: the
            # retry gets the new epoch) follows.
            parked = ctx.park(build)
            broker.end_transaction(outcome.aborted, parked)
            return parked
        broker.persist_transactions()
        return after_writes(ctx, Result(None, [], []), build)
    # Answered once the block the id came from is durable.
    producer_id = broker.allocate_producer_id()
    return after_writes(ctx, Result(None, [], []), lambda _: answer(ErrorCode.NONE, producer_id, 0))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=5)
