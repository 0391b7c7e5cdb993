"""ApiVersions (key 18), versions 0-4.

v0 lists each API with its version range; v1 adds throttle time; v3 is flexible and carries
the client's software name and version (KIP-511), and the features, as a Kafka 4.0 broker
reports them: `metadata.version` supported from 3.3-IV3 (level 7) to 4.0-IV3 (25) and
finalized at 4.0-IV3, the level whose API versions these are; `group.version` finalized at 1
(KIP-848's consumer protocol is on). `transaction.version` is left out: only its level 0 (the
classic transaction protocol) is served, and a client reads its absence as that. v4 only lets
clients say they accept an UNSUPPORTED_VERSION answer at v0 — which every version gets
anyway. The list comes from the handler registry: an API is advertised because a handler for
it exists. A v3+ request whose software name or version is not KIP-511's
`[a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?` is INVALID_REQUEST, as in Kafka.

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
# Kafka 4.0's range of metadata versions, 3.3-IV3 (7) to 4.0-IV3 (25), which a 4.0 cluster
# finalizes at its top (`kafka-features.sh describe` on 4.0.0).
METADATA_VERSION = "metadata.version"
METADATA_VERSION_RANGE = (7, 25)
# Each feature's (lowest, highest) supported level, and the level it is finalized at.
FEATURES = {
    METADATA_VERSION: (METADATA_VERSION_RANGE, METADATA_VERSION_RANGE[1]),
    GROUP_VERSION: ((0, GROUP_VERSION_LEVEL), GROUP_VERSION_LEVEL),
}
# The features never change here, so their epoch is constant (>= 0: the list is valid).
FEATURES_EPOCH = 0


def build(version: int, error: ErrorCode, api_keys: list[Any]) -> Any:
    supported, finalized = [], []
    if error is ErrorCode.NONE:
        for name, ((low, high), level) in FEATURES.items():
            # As Kafka does: a feature whose lowest level is 0 is listed only from v4 (older
            # clients took min_version 0 for "not supported").
            if low > 0 or version >= 4:
                supported.append(
                    ApiVersionsResponse.SupportedFeatureKey(
                        name=name, min_version=low, max_version=high
                    )
                )
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
