"""CreateDelegationToken (key 38), versions 1-3: refused as a Kafka broker without
`delegation.token.secret.key` refuses it (security/delegation_tokens.py has the rules).

The answer names the token's owner (the request's, else the requester) and, from v3, the
requester. Refused before the controller, its timestamps are -1; refused by it (disabled),
0. v2 is flexible; v3 adds the owner to the request and the requester to the answer.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import ANONYMOUS, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import Operation, ResourceType
from minicoord.server.security.delegation_tokens import (
    ERROR_TIMESTAMP,
    USER_TYPE,
    requests_allowed,
    split_principal,
)

API_KEY = 38


def handle(ctx: RequestContext, request: Any) -> Any:
    requester = split_principal(ctx.principal)
    named = ctx.version >= 3 and request.owner_principal_name
    owner = (request.owner_principal_type, request.owner_principal_name) if named else requester
    timestamp = ERROR_TIMESTAMP
    if owner[0] is None:
        # An owner named without a type: Kafka's KafkaPrincipal refuses the null, and its
        # error answer names ANONYMOUS for both principals.
        error = ErrorCode.UNKNOWN_SERVER_ERROR
        owner = requester = split_principal(ANONYMOUS)
    elif not requests_allowed(ctx.channel):
        error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    elif owner != requester and not authorize.allowed(
        ctx, Operation.CREATE_TOKENS, ResourceType.USER, f"{owner[0]}:{owner[1]}"
    ):
        error = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    elif any(r.principal_type != USER_TYPE for r in request.renewers):
        error = ErrorCode.INVALID_PRINCIPAL_TYPE
    else:
        error, timestamp = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0
    fields: dict[str, Any] = {}
    if ctx.version >= 3:
        fields["token_requester_principal_type"] = requester[0]
        fields["token_requester_principal_name"] = requester[1]
    return ctx.spec.response(
        version=ctx.version,
        error_code=error,
        principal_type=owner[0],
        principal_name=owner[1],
        issue_timestamp_ms=timestamp,
        expiry_timestamp_ms=timestamp,
        max_timestamp_ms=timestamp,
        token_id="",
        hmac=b"",
        throttle_time_ms=0,
        **fields,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
