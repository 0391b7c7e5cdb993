"""InitProducerId (key 22), versions 0-5 (v6, two-phase commit, is unstable in Kafka).

For an idempotent producer (no transactional id) every call gets a fresh producer id with
epoch 0, whatever id and epoch it sends, as Kafka's coordinator answers; epoch bumps of an
idempotent producer are the client's own (KIP-360). Ids come from blocks claimed in the
cluster metadata log before use, so none is handed out twice, restarts included. A
transactional id is answered COORDINATOR_NOT_AVAILABLE: there is no transaction coordinator
(FindCoordinator refuses a transactional id with INVALID_REQUEST first, so a client gets here
only without looking its coordinator up). v2 is flexible; v3 carries the producer's id and epoch; v4
PRODUCER_FENCED; v5 TRANSACTION_ABORTABLE.
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
    if request.transactional_id is not None:
        if not request.transactional_id:
            refused(ctx, ErrorCode.INVALID_REQUEST, "empty transactional id")
            return answer(ErrorCode.INVALID_REQUEST)
        refused(
            ctx,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"transactions are not served (transactional id {request.transactional_id!r})",
        )
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    broker = ctx.broker
    ids = broker.data.producer_ids
    if ids.needs_block():
        ids.claim_block()
        broker.persist_metadata([ids.block_record(broker.config.broker_id)])
    producer_id = ids.allocate()
    parked = ctx.park(lambda _: answer(ErrorCode.NONE, producer_id, 0))
    # Answered once the block it came from is durable.
    broker.apply(Result(None, [], []), parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=5)
