"""UpdateFeatures (key 57), versions 0-2: change the cluster's finalized features (KIP-584),
as Kafka 4's controller does (QuorumController.updateFeatures, FeatureControlManager).

Every update must be allowed, or none is made: the answer's top-level error is then
INVALID_UPDATE_VERSION with "The update failed for all features since the following feature
had an error: " and the first reason, in Kafka's words (server/features.py has the rules).
Accepted, the levels are FeatureLevelRecords in the cluster metadata log and the answer waits
for them; `validate_only` (v1+) writes nothing. v0 says downgrade with `allow_downgrade`,
v1+ with an upgrade type (1 upgrade, 2 safe downgrade, 3 unsafe downgrade); v0-1 list each
feature's result, v2 none. Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED at the top
otherwise).
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.features import SAFE_DOWNGRADE, UPGRADE
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 57
FAILED = "The update failed for all features since the following feature had an error: "


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.version
    updates = [
        (
            u.feature,
            u.max_version_level,
            u.upgrade_type if version >= 1 else (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE),
        )
        for u in request.feature_updates
    ]
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        return _answer(
            ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authorize.not_authorized(ctx), []
        )
    # Named twice, a feature's last update counts (Kafka collects them in a map).
    updates = list({name: (name, level, kind) for name, level, kind in updates}.values())
    problem = broker.features.refusal(updates, broker.config.broker_id)
    if problem is not None:
        return _answer(ctx, ErrorCode.INVALID_UPDATE_VERSION, FAILED + problem, [])
    # Each feature's result (v0-1): Errors.NONE's own text, as Kafka sets it.
    response = _answer(ctx, ErrorCode.NONE, None, [u.feature for u in request.feature_updates])
    if version >= 1 and request.validate_only:
        return response
    broker.update_features(broker.features.records(updates))
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the records are durable
    return parked


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, named: list[str]) -> Any:
    response = ctx.spec.response
    results = (
        [
            response.UpdatableFeatureResult(feature=name, error_code=0, error_message="NONE")
            for name in named
        ]
        if ctx.version <= 1
        else []
    )
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        results=results,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 0, 2)
