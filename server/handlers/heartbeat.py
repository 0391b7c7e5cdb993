"""Heartbeat (key 12), versions 0-4.

The hottest request: it only refreshes the member's liveness and reports whether a rebalance
is under way (REBALANCE_IN_PROGRESS tells the member to rejoin). v3 adds group.instance.id;
v4 is flexible. It writes no records.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import HeartbeatResponse
from minicoord.protocol.apis import SPECS
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 12


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    error = broker.coordinator.heartbeat(
        broker.now(),
        request.group_id,
        request.member_id,
        request.generation_id,
        request.group_instance_id if ctx.version >= 3 else None,
    )
    return HeartbeatResponse(version=ctx.version, throttle_time_ms=0, error_code=error)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
