"""DescribeDelegationToken (key 41), versions 1-3: as a Kafka broker without
`delegation.token.secret.key` answers it, with no tokens and DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
on a channel that cannot carry a token request, else DELEGATION_TOKEN_AUTH_DISABLED
(security/delegation_tokens.py). v2 is flexible; v3 adds each token's requester.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security.delegation_tokens import requests_allowed

API_KEY = 41


def handle(ctx: RequestContext, request: Any) -> Any:
    if requests_allowed(ctx.channel):
        error = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    else:
        error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return ctx.spec.response(version=ctx.version, error_code=error, tokens=[], throttle_time_ms=0)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
