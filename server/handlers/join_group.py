"""JoinGroup (key 11), versions 0-9.

v1 adds the rebalance timeout (v0 uses the session timeout for both); v4 makes a dynamic
member with no id come back with the id we hand it (MEMBER_ID_REQUIRED, KIP-394); v5 static
membership (group.instance.id, KIP-345); v6 is flexible; v7 returns the protocol type; v8
carries the client's reason; v9 can tell a returning static leader to skip assignment
(KIP-814). The reply is parked until the join phase completes.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_rebalance, fast_rebalance_requests
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.answers import ParkedReply
from minicoord.server.coordinator.member import Protocols, intern_protocols
from minicoord.server.coordinator.results import JoinOutcome
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.request_log import UNRECOVERABLE, refused
from minicoord.server.security import authorize

API_KEY = 11


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    group_id = request.group_id
    # The members' shared copy (most members of a group send the same protocols): what a
    # waiting join holds for its refusal line costs nothing of its own.
    protocols, _ = intern_protocols(request.protocols)
    parked = ctx.adopt(
        JoinReply(ctx, group_id, request.session_timeout_ms, request.protocol_type, protocols)
    )
    broker = ctx.broker
    if broker.authorizer is not None and authorize.group_denied(ctx, group_id):
        return parked.make(JoinOutcome(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    result = broker.coordinator.join_group(
        broker.now(),
        parked,
        group_id=group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id,
        client_host=ctx.channel.client_host,
        session_timeout_ms=parked.session_timeout_ms,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms if version >= 1 else parked.session_timeout_ms
        ),
        protocol_type=parked.protocol_type,
        protocols=protocols,
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=request.reason if version >= 8 else None,
    )
    broker.apply(result)
    return parked


class JoinReply(ParkedReply):
    """A JoinGroup's reply, waiting for the join phase to end, with the few fields of the
    request its answer and refusal line need (not the request): a crowd of joins waits at
    once, and this one object is what each holds meanwhile."""

    __slots__ = ("group_id", "protocol_type", "protocols", "session_timeout_ms")

    def __init__(
        self,
        ctx: RequestContext,
        group_id: str,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> None:
        super().__init__(ctx.channel, ctx.header, ctx.spec, None)  # type: ignore[arg-type]
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols

    def make(self, outcome: JoinOutcome) -> EncodedResponse:
        version = self._version
        if outcome.error in UNRECOVERABLE:
            ctx = self.context()
            why = _why(
                ctx,
                self.group_id,
                outcome.error,
                self.session_timeout_ms,
                self.protocol_type,
                self.protocols,
            )
            refused(ctx, outcome.error, why, self.group_id)
        protocol_name = outcome.protocol_name
        if protocol_name is None and version < 7:
            protocol_name = ""
        # Packed by hand (byte-equal to the generated encoder, see its tests): a large
        # group's join phase ends with one answer per member at once.
        body = fast_rebalance.encode_join_response(
            version,
            outcome.error,
            outcome.generation_id,
            outcome.protocol_type,
            protocol_name,
            outcome.leader_id,
            outcome.skip_assignment,
            outcome.member_id,
            outcome.members,
        )
        return EncodedResponse(body, outcome.error)


def _why(
    ctx: RequestContext,
    group_id: str,
    error: ErrorCode,
    session_timeout_ms: int,
    protocol_type: str,
    protocols: Protocols,
) -> str:
    """The refusal's detail in the words of the client's own configuration."""
    why = f"group {group_id!r}"
    if error is ErrorCode.INVALID_SESSION_TIMEOUT:
        config = ctx.broker.config
        why += (
            f": session.timeout.ms={session_timeout_ms} is outside "
            f"group.min.session.timeout.ms={config.group_min_session_timeout_ms} .. "
            f"group.max.session.timeout.ms={config.group_max_session_timeout_ms}"
        )
    elif error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
        names = ",".join(name for name, _ in protocols)
        why += f": protocol type {protocol_type!r} with [{names}] matches no member's"
    return why


HANDLER = Handler.for_spec(
    SPECS[API_KEY], handle, decode=fast_rebalance_requests.decode_join_request
)
