"""Heartbeat (key 12), versions 0-4.

The hottest request: it only refreshes the member's liveness and reports whether a rebalance
is under way (REBALANCE_IN_PROGRESS tells the member to rejoin). v3 adds group.instance.id;
v4 is flexible. It writes no records.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_heartbeat
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 12


def handle(ctx: RequestContext, request: fast_heartbeat.HeartbeatFields) -> Any:
    broker = ctx.broker
    if broker.authorizer is not None and authorize.group_denied(ctx, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return EncodedResponse(fast_heartbeat.encode_response(ctx.version, error), error)
    error = broker.coordinator.heartbeat(
        broker.now(),
        request.group_id,
        request.member_id,
        request.generation_id,
        request.group_instance_id,
    )
    return EncodedResponse(fast_heartbeat.encode_response(ctx.version, error), error)


# A hand-written codec (byte-equal to the generated one, see its tests): a heartbeat is the
# request a coordinator serves most, and the generated codec builds objects both ways.
HANDLER = Handler.for_spec(SPECS[API_KEY], handle, decode=fast_heartbeat.decode_request)
