"""LeaveGroup (key 13), versions 0-5.

v0-2 name one member; v3 takes a batch of members, by member id or group.instance.id
(KIP-345), with an error per member; v4 is flexible; v5 carries a reason per member.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_rebalance
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import LeaveOutcome
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 13


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    if version < 3:
        leaving: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]

    def build(outcome: LeaveOutcome) -> Any:
        # Packed by hand (byte-equal to the generated encoder, see its tests): a large group
        # shutting down sends one LeaveGroup per member.
        error = outcome.error
        if version < 3:
            if error is ErrorCode.NONE and outcome.members:
                error = outcome.members[0].error
            return EncodedResponse(fast_rebalance.encode_leave_response(version, error, ()), error)
        members = [(m.member_id, m.group_instance_id, m.error) for m in outcome.members]
        body = fast_rebalance.encode_leave_response(version, error, members)
        return EncodedResponse(body, error)

    broker = ctx.broker
    if broker.authorizer is not None and authorize.group_denied(ctx, request.group_id):
        return build(LeaveOutcome(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    parked = ctx.park(build)
    broker.apply(broker.coordinator.leave_group(broker.now(), request.group_id, leaving), parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
