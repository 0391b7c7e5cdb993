"""AlterClientQuotas (key 49), versions 0-1: set or remove quotas of users, client ids and IP
addresses (server/client_quotas.py). Each entity's changes are ClientQuotaRecords in the
cluster metadata log, and the answer waits until they are written; `validate_only` checks
and writes nothing. Needs AlterConfigs on the cluster, as in Kafka
(CLUSTER_AUTHORIZATION_FAILED for each entity otherwise)."""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 49


def handle(ctx: RequestContext, request: Any) -> Any:
    from minicoord.server.client_quotas import Outcome, alter

    broker = ctx.broker
    if not authorize.cluster_allowed(ctx, authorize.ALTER_CONFIGS):
        message = authorize.not_authorized(ctx)
        outcomes = [
            Outcome(
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                message,
            )
            for entry in request.entries
        ]
        records: list[bytes] = []
    else:
        outcomes, records = alter(broker.client_quotas, request.entries, request.validate_only)
    entry_cls = ctx.spec.response.EntryData
    response = ctx.spec.response(
        version=ctx.version,
        throttle_time_ms=0,
        entries=[
            entry_cls(
                error_code=o.error,
                error_message=o.message,
                entity=[entry_cls.EntityData(entity_type=t, entity_name=n) for t, n in o.entity],
            )
            for o in outcomes
        ],
    )
    if not records:
        return response
    broker.persist_metadata(records)
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the records are durable
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 1)
