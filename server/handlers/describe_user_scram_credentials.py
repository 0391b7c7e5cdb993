"""DescribeUserScramCredentials (key 50), version 0: each SCRAM user's mechanisms and
iteration counts (never salts or keys)."""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 50


def handle(ctx: RequestContext, request: Any) -> Any:
    from minicoord.server.security.users import describe

    users = None if request.users is None else [u.name for u in request.users]
    # An empty list asks for every user, as a null one does (Kafka's describe-all).
    rows = describe(ctx.broker.user_store(), users or None)
    result_cls = ctx.spec.response.DescribeUserScramCredentialsResult
    info_cls = result_cls.CredentialInfo
    return ctx.spec.response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        results=[
            result_cls(
                user=user,
                error_code=error,
                error_message=message,
                credential_infos=[info_cls(mechanism=m, iterations=i) for m, i in infos],
            )
            for user, error, message, infos in rows
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 0)
