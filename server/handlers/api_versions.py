"""ApiVersions (key 18), versions 0-4.

v0 lists each API with its version range; v1 adds throttle time; v3 is flexible and carries
the client's software name and version (KIP-511); v4 only lets clients say they accept an
UNSUPPORTED_VERSION answer at v0 — which every version gets anyway. The list comes from the
handler registry: an API is advertised because a handler for it exists.

The answer to an ApiVersions version we do not serve (v0 with UNSUPPORTED_VERSION and the full
list, so the client can retry) is produced by the connection, before any decoding.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 18


def build(version: int, error: ErrorCode, api_keys: list[Any]) -> Any:
    return ApiVersionsResponse(
        version=version, error_code=error, api_keys=api_keys, throttle_time_ms=0
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    return build(ctx.version, ErrorCode.NONE, ctx.broker.handlers.api_versions())


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
