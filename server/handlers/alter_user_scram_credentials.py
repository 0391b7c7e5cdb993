"""AlterUserScramCredentials (key 51), version 0: create, change or delete SCRAM users.

The client sends the salted password (never the password); the credential derived from it
goes into the cluster metadata log, and the answer waits until that record is written.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 51


def handle(ctx: RequestContext, request: Any) -> Any:
    from minicoord.server.security.users import alter

    broker = ctx.broker
    outcomes, records = alter(
        broker.user_store(), request.deletions or [], request.upsertions or []
    )
    broker.persist_metadata(records)
    result_cls = ctx.spec.response.AlterUserScramCredentialsResult
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
