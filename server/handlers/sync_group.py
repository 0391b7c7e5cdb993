"""SyncGroup (key 14), versions 0-5.

The leader sends every member's assignment; followers wait for it (a parked reply). v3 adds
group.instance.id; v4 is flexible; v5 names the protocol type and name the member believes
were chosen, and a mismatch is INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_rebalance, fast_rebalance_requests
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.answers import ParkedReply
from minicoord.server.coordinator.results import SyncOutcome
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.request_log import UNRECOVERABLE, refused
from minicoord.server.security import authorize

API_KEY = 14


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    group_id = request.group_id
    parked = ctx.adopt(SyncReply(ctx, group_id))
    broker = ctx.broker
    if broker.authorizer is not None and authorize.group_denied(ctx, group_id):
        return parked.make(SyncOutcome(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    result = broker.coordinator.sync_group(
        broker.now(),
        parked,
        group_id=group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments=dict(request.assignments),
    )
    broker.apply(result)
    return parked


class SyncReply(ParkedReply):
    """A SyncGroup's reply, waiting for the leader's assignment, with the group id for its
    refusal line and not the request (a leader's holds every assignment): every follower
    waits at once, and this one object is what each holds meanwhile."""

    __slots__ = ("group_id",)

    def __init__(self, ctx: RequestContext, group_id: str) -> None:
        super().__init__(ctx.channel, ctx.header, ctx.spec, None)  # type: ignore[arg-type]
        self.group_id = group_id

    def make(self, outcome: SyncOutcome) -> EncodedResponse:
        if outcome.error in UNRECOVERABLE:
            refused(self.context(), outcome.error, f"group {self.group_id!r}", self.group_id)
        # Packed by hand (byte-equal to the generated encoder, see its tests): the leader's
        # assignment releases every follower's answer at once.
        body = fast_rebalance.encode_sync_response(
            self._version,
            outcome.error,
            outcome.protocol_type,
            outcome.protocol_name,
            outcome.assignment,
        )
        return EncodedResponse(body, outcome.error)


HANDLER = Handler.for_spec(
    SPECS[API_KEY], handle, decode=fast_rebalance_requests.decode_sync_request
)
