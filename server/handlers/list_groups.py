"""ListGroups (key 16), versions 0-5.

v1 adds throttle time; v3 is flexible; v4 filters by state and reports each group's state
(KIP-518); v5 filters by type and reports it ("classic", or "consumer" for KIP-848 groups).
Every version lists groups of both types, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ListGroupsResponse
from minicoord.protocol.apis import SPECS
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 16


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    states = set(request.states_filter) if version >= 4 and request.states_filter else None
    types = set(request.types_filter) if version >= 5 and request.types_filter else None
    error, listings = ctx.broker.coordinator.list_groups(states, types)
    if ctx.broker.authorizer is not None and not authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        # As Kafka: without Describe on the cluster, only the groups one may describe.
        listings = [
            g for g in listings if not authorize.group_denied(ctx, g.group_id, authorize.DESCRIBE)
        ]
    return ListGroupsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listings
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
