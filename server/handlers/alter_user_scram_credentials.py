"""AlterUserScramCredentials (key 51), version 0: create, change or delete SCRAM users.

The client sends the salted password (never the password); the credential derived from it
goes into the cluster metadata log, and the answer waits until that record is written. Needs
Alter on the cluster, as in Kafka (CLUSTER_AUTHORIZATION_FAILED for each user named otherwise).
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 51


def handle(ctx: RequestContext, request: Any) -> Any:
    from minicoord.server.security.users import alter

    broker = ctx.broker
    result_cls = ctx.spec.response.AlterUserScramCredentialsResult
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        # Kafka's getErrorResponse: one result per user named, in name order.
        named = {d.name for d in request.deletions or ()} | {
            u.name for u in request.upsertions or ()
        }
        message = authorize.not_authorized(ctx)
        return ctx.spec.response(
            version=ctx.version,
            throttle_time_ms=0,
            results=[
                result_cls(
                    user=user,
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=message,
                )
                for user in sorted(named)
            ],
        )
    outcomes, records = alter(
        broker.user_store(), request.deletions or [], request.upsertions or []
    )
    broker.persist_metadata(records)
    response = ctx.spec.response(
        version=ctx.version,
        throttle_time_ms=0,
        results=[
            result_cls(user=o.user, error_code=o.error, error_message=o.message) for o in outcomes
        ],
    )
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the records are durable
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 0)
