"""DescribeClientQuotas (key 48), versions 0-1: the quotas of the entities a filter matches
(server/client_quotas.py). Needs DescribeConfigs on the cluster, as in Kafka; a refusal, or a
filter Kafka refuses, is the whole answer's error, with no entries."""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 48


def handle(ctx: RequestContext, request: Any) -> Any:
    from minicoord.server.client_quotas import DescribeError, describe

    response = ctx.spec.response

    def refused(error: ErrorCode, message: str) -> Any:
        return response(
            version=ctx.version,
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            entries=None,
        )

    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE_CONFIGS):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        found = describe(ctx.broker.client_quotas, request.components, request.strict)
    except DescribeError as exc:
        return refused(exc.error, exc.message)
    entry = response.EntryData
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                values=[entry.ValueData(key=k, value=v) for k, v in values],
            )
            for entity, values in found
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 1)
