"""SaslAuthenticate (key 36), versions 0-2, outside authentication.

The gate of a SASL connection answers it during authentication; a handler sees it only on a
listener without SASL or after authentication, where Kafka answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 36


def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.spec.response(
        version=ctx.version,
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 2)
