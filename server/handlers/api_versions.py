"""ApiVersions (key 18), versions 0-4.

v0 lists each API with its version range; v1 adds throttle time; v3 is flexible and carries
the client's software name and version (KIP-511), and the features: `group.version` is
finalized at 1 (KIP-848's consumer protocol is on); v4 only lets clients say they accept an
UNSUPPORTED_VERSION answer at v0 — which every version gets anyway. The list comes from the
handler registry: an API is advertised because a handler for it exists. A v3+ request whose
software name or version is not KIP-511's `[a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?` is
INVALID_REQUEST, as in Kafka.

The answer to an ApiVersions version we do not serve (v0 with UNSUPPORTED_VERSION and
ApiVersions' own range, so the client can retry) is produced by the connection, before any
decoding.
"""

from __future__ import annotations

import re
from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 18


# KIP-511: what a v3+ client may call its software and version (ApiVersionsRequest.isValid).
SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

# The feature KIP-848 consumer groups depend on: level 1 enables the consumer protocol.
GROUP_VERSION = "group.version"
GROUP_VERSION_LEVEL = 1
# The features never change here, so their epoch is constant (>= 0: the list is valid).
FEATURES_EPOCH = 0


def build(version: int, error: ErrorCode, api_keys: list[Any]) -> Any:
    supported, finalized = [], []
    if error is ErrorCode.NONE:
        # As Kafka does: a feature whose lowest level is 0 is listed only from v4 (older
        # clients took min_version 0 for "not supported"); finalized at level 1 always.
        if version >= 4:
            supported = [
                ApiVersionsResponse.SupportedFeatureKey(
                    name=GROUP_VERSION, min_version=0, max_version=GROUP_VERSION_LEVEL
                )
            ]
        finalized = [
            ApiVersionsResponse.FinalizedFeatureKey(
                name=GROUP_VERSION,
                max_version_level=GROUP_VERSION_LEVEL,
                min_version_level=GROUP_VERSION_LEVEL,
            )
        ]
    return ApiVersionsResponse(
        version=version,
        error_code=error,
        api_keys=api_keys,
        throttle_time_ms=0,
        supported_features=supported,
        finalized_features_epoch=FEATURES_EPOCH if finalized else -1,
        finalized_features=finalized,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= 3 and not (
        SOFTWARE.fullmatch(request.client_software_name or "")
        and SOFTWARE.fullmatch(request.client_software_version or "")
    ):
        # Kafka's KafkaApis answers INVALID_REQUEST, with no list, and keeps the connection.
        return build(ctx.version, ErrorCode.INVALID_REQUEST, [])
    return build(ctx.version, ErrorCode.NONE, ctx.broker.handlers.api_versions())


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
