"""SaslHandshake (key 17), versions 0-1, outside authentication.

On a SASL listener the connection's gate (server/security/connections.py) answers it while
the client authenticates. Here it reaches a handler only where Kafka's request handler sees it:
on a listener without SASL, or on an authenticated connection that may not re-authenticate.
Kafka answers ILLEGAL_SASL_STATE there.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 17


def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.spec.response(
        version=ctx.version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 1)
