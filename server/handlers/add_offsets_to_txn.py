"""AddOffsetsToTxn (key 25), versions 0-4: a producer's transaction will commit a group's
offsets (TxnOffsetCommit). Kafka adds the group's `__consumer_offsets` partition to the
transaction; here the group itself is added, its offsets settled when the transaction ends.
With ACLs: Write on the transactional id, then Read on the group. v3 is flexible; v4 adds
TRANSACTION_ABORTABLE to what a client handles.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddOffsetsToTxnResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import OFFSETS_TOPIC
from minicoord.server.transactions.answers import after_writes, compatible

API_KEY = 25


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker

    def answer(error: ErrorCode) -> Any:
        return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=error)

    tid, group = request.transactional_id, request.group_id
    if broker.authorizer is not None:
        if not authorize.allowed(ctx, authorize.WRITE, authorize.TRANSACTIONAL_ID, tid):
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if authorize.group_denied(ctx, group):
            return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    # The group's offsets partition joins the transaction, as Kafka records it.
    offsets_partition = (OFFSETS_TOPIC, broker.coordinator.partition_for(group))
    error = broker.transactions.add_partitions(
        tid, request.producer_id, request.producer_epoch, [offsets_partition], broker.now()
    )
    broker.persist_transactions()
    error = compatible(error, version, 2)
    return after_writes(ctx, Result(None, [], []), lambda _: answer(error))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=4)
