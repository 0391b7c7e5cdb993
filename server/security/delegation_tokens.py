"""Delegation tokens as a Kafka broker answers for them with token authentication disabled:
Kafka's default, with no `delegation.token.secret.key` set (minicoord has no such setting and
grants no token logins, so its four token APIs answer as that broker does).

KafkaApis first refuses a token request on a channel that cannot carry one
(`allowTokenRequests`: a PLAINTEXT listener, SSL without a client certificate, a login made
with a token) with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. A CreateDelegationToken for another
owner then needs CreateTokens on that user, and renewers must be users; what is left reaches
the controller, which answers DELEGATION_TOKEN_AUTH_DISABLED. The checks and their order are
those of Kafka 4's KafkaApis (the broker checks before it forwards) and the controller's
DelegationTokenControlManager. DescribeDelegationToken is the broker's own: not allowed, else
disabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import ANONYMOUS

if TYPE_CHECKING:
    from minicoord.server.handlers.base import Channel, RequestContext

# The timestamps Kafka answers a token request refused before the controller
# (DelegationTokenManager.ErrorTimestamp); the controller's own refusals leave them at 0.
ERROR_TIMESTAMP = -1
USER_TYPE = "User"


def requests_allowed(channel: Channel) -> bool:
    """Whether a token request may be made on this connection (KafkaApis.allowTokenRequests)."""
    from minicoord.server.security.connections import SaslConnection, TlsConnection

    if isinstance(channel, SaslConnection):
        return True
    return isinstance(channel, TlsConnection) and channel.principal != ANONYMOUS


def split_principal(principal: str) -> tuple[str, str]:
    """("User", "alice") of "User:alice", as KafkaPrincipal holds it."""
    kind, _, name = principal.partition(":")
    return kind, name


def expiry_change(ctx: RequestContext, request: object) -> Any:
    """The answer of RenewDelegationToken and ExpireDelegationToken, which differ only in
    which way they would move the expiry: -1 when refused before the controller, 0 by it."""
    if requests_allowed(ctx.channel):
        error, expiry = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0
    else:
        error, expiry = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
    return ctx.spec.response(
        version=ctx.version, error_code=error, expiry_timestamp_ms=expiry, throttle_time_ms=0
    )
