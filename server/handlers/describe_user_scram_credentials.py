"""DescribeUserScramCredentials (key 50), version 0: each SCRAM user's mechanisms and
iteration counts (never salts or keys). Needs Describe on the cluster, as in Kafka
(CLUSTER_AUTHORIZATION_FAILED on the whole answer and on each user named, otherwise)."""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 50


def handle(ctx: RequestContext, request: Any) -> Any:
    from minicoord.server.security.users import describe

    users = None if request.users is None else [u.name for u in request.users]
    result_cls = ctx.spec.response.DescribeUserScramCredentialsResult
    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        # Kafka's getErrorResponse: the error on the answer and on a result per name asked
        # (which names no user), with the error's own message (not authorizeClusterOperation's
        # "Request ... is not authorized.", which the ACL APIs answer).
        error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return ctx.spec.response(
            version=ctx.version,
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            results=[
                result_cls(user="", error_code=error, error_message=message, credential_infos=[])
                for _ in users or ()
            ],
        )
    # An empty list asks for every user, as a null one does (Kafka's describe-all).
    rows = describe(ctx.broker.user_store(), users or None)
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
