"""OAUTHBEARER with unsecured JWTs, as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler
accepts them: for tests of OAuth client flows, never for protection (anyone can mint one).

The client's message (RFC 7628): "n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01]\\x01".
The token is header.payload. with header alg "none"; the principal is the claim named by
`unsecuredValidatorPrincipalClaimName` (sub), `exp` (seconds) must be in the future and `iat`
not ahead of it, and `unsecuredValidatorRequiredScope` names scopes the `scope` claim must hold.
A refusal answers a JSON error as a challenge; the client acknowledges it with \\x01 and is
then refused with that JSON as the message, as Kafka does.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass


class OAuthFailed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class UnsecuredValidator:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_options(cls, options: dict[str, str]) -> UnsecuredValidator:
        scope = options.get("unsecuredValidatorRequiredScope", "")
        return cls(
            options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub",
            options.get("unsecuredValidatorScopeClaimName", "scope") or "scope",
            tuple(s for s in scope.replace(",", " ").split() if s),
            int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0),
        )

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms); OAuthFailed(json error) if not acceptable."""
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise OAuthFailed(_status("invalid_token"))
        try:
            header = json.loads(_b64(parts[0]))
            claims = json.loads(_b64(parts[1]))
        except (ValueError, UnicodeDecodeError):
            raise OAuthFailed(_status("invalid_token")) from None
        if not isinstance(header, dict) or header.get("alg") != "none":
            raise OAuthFailed(_status("invalid_token"))
        if not isinstance(claims, dict):
            raise OAuthFailed(_status("invalid_token"))
        principal = claims.get(self.principal_claim)
        exp = claims.get("exp")
        iat = claims.get("iat")
        if not isinstance(principal, str) or not principal.strip():
            raise OAuthFailed(_status("invalid_token"))
        if not _number(exp):
            raise OAuthFailed(_status("invalid_token"))
        exp_ms = int(exp * 1000)
        if exp_ms + self.clock_skew_ms <= now_ms:
            raise OAuthFailed(_status("invalid_token"))
        # Milliseconds truncated as Kafka takes them (a token issued this very millisecond is
        # not "in the future").
        if iat is not None and (not _number(iat) or int(iat * 1000) - self.clock_skew_ms > now_ms):
            raise OAuthFailed(_status("invalid_token"))
        if self.required_scope:
            granted = claims.get(self.scope_claim, [])
            if isinstance(granted, str):
                granted = granted.split()
            if not isinstance(granted, list) or not set(self.required_scope) <= set(granted):
                raise OAuthFailed(_status("insufficient_scope", " ".join(self.required_scope)))
        return principal, exp_ms


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _b64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")


def _status(status: str, scope: str | None = None) -> str:
    body = f'{{"status":"{status}"'
    if scope:
        body += f', "scope":"{scope}"'
    return body + "}"


def parse_client_message(data: bytes) -> tuple[str, str | None]:
    """(token, authorization id or None); ValueError if not an OAUTHBEARER initial response."""
    text = data.decode("utf-8")
    gs2, sep, rest = text.partition("\x01")
    fields = gs2.split(",")
    if not sep or len(fields) < 2 or fields[0] not in ("n", "y"):
        raise ValueError("not a GS2 header")
    authzid = fields[1][2:] if fields[1].startswith("a=") else None
    token = None
    for item in rest.split("\x01"):
        key, eq, value = item.partition("=")
        if key == "auth" and eq:
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer":
                raise ValueError("not a bearer token")
    if not token:
        raise ValueError("no auth=Bearer")
    return token.strip(), authzid


class OAuthExchange:
    def __init__(self, validator: UnsecuredValidator) -> None:
        self._validator = validator
        self._error: str | None = None
        self.complete = False
        self.username: str | None = None
        self.expiry_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        """The answer to a client message; OAuthFailed(message) to refuse."""
        if token == b"\x01" and self._error is not None:
            raise OAuthFailed(self._error)
        self._error = None
        try:
            jwt, authzid = parse_client_message(token)
        except (ValueError, UnicodeDecodeError):
            raise OAuthFailed(
                "Authentication failed: Invalid OAUTHBEARER client first message"
            ) from None
        try:
            principal, exp_ms = self._validator.validate(jwt, int(time.time() * 1000))
        except OAuthFailed as exc:
            # A challenge the client acknowledges before it is refused (RFC 7628 3.2.2).
            self._error = str(exc)
            return self._error.encode()
        if authzid and authzid != principal:
            raise OAuthFailed(
                "Authentication failed: Client requested an authorization id "
                f"({authzid}) that is different from the token's principal name ({principal})"
            )
        self.username, self.expiry_ms, self.complete = principal, exp_ms, True
        return b""
