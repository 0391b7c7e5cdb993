"""ApiVersions (key 18), versions 0-4.

v0 lists each API with its version range; v1 adds throttle time; v3 is flexible and carries
the client's software name and version (KIP-511), and the features: the levels this node
supports and those the cluster is finalized at, with their epoch (server/features.py;
UpdateFeatures changes them). v4 only lets clients say they accept an UNSUPPORTED_VERSION
answer at v0 — which every version gets anyway. The list comes from the handler registry: an
API is advertised because a handler for it exists. A v3+ request whose software name or
version is not KIP-511's `[a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?` is INVALID_REQUEST, as
in Kafka.

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
from minicoord.server.features import SUPPORTED, Features
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 18


# KIP-511: what a v3+ client may call its software and version (ApiVersionsRequest.isValid).
SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def build(
    version: int,
    error: ErrorCode,
    api_keys: list[Any],
    features: Features | None = None,
    epoch: int = 0,
) -> Any:
    supported, finalized = [], []
    if error is ErrorCode.NONE and features is not None:
        for name, (low, high) in SUPPORTED.items():
            # As Kafka does: a feature whose lowest level is 0 is listed only from v4 (older
            # clients took min_version 0 for "not supported").
            if low > 0 or version >= 4:
                supported.append(
                    ApiVersionsResponse.SupportedFeatureKey(
                        name=name, min_version=low, max_version=high
                    )
                )
        for name, level in features.finalized().items():
            finalized.append(
                ApiVersionsResponse.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level
                )
            )
    return ApiVersionsResponse(
        version=version,
        error_code=error,
        api_keys=api_keys,
        throttle_time_ms=0,
        supported_features=supported,
        finalized_features_epoch=epoch if finalized else -1,
        finalized_features=finalized,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= 3 and not (
        SOFTWARE.fullmatch(request.client_software_name or "")
        and SOFTWARE.fullmatch(request.client_software_version or "")
    ):
        # Kafka's KafkaApis answers INVALID_REQUEST, with no list, and keeps the connection.
        return build(ctx.version, ErrorCode.INVALID_REQUEST, [])
    broker = ctx.broker
    return build(
        ctx.version,
        ErrorCode.NONE,
        broker.handlers.api_versions(),
        broker.features,
        broker.features_epoch(),
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
