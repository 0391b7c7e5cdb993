"""The SASL server side of a connection, sans-IO: Kafka's SaslServerAuthenticator, as states.

Before authentication a SASL listener takes ApiVersions (once, first), then SaslHandshake,
then the mechanism's tokens: in SaslAuthenticate requests after a v1 handshake (KIP-152), or
raw size-prefixed tokens after a v0 one. Anything else closes the connection. A refused
authentication answers SASL_AUTHENTICATION_FAILED with Kafka's message and then closes.

With `connections.max.reauth.ms` (or an OAUTHBEARER token's expiry) a session has a lifetime,
told to SaslAuthenticate v1+ clients; past it the connection serves nothing but a new
SaslHandshake + SaslAuthenticate (KIP-368), which must keep the mechanism and principal.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import field
from enum import Enum
from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.config import ConfigError
from minicoord.server.security.listeners import Listener, listeners_of, mechanism_setting, setting

if TYPE_CHECKING:
    from minicoord.server.config import Config
    from minicoord.server.security.oauth import UnsecuredValidator
    from minicoord.server.security.scram import ScramCredential

log = logging.getLogger("minicoord.security")

SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def enabled_mechanisms(config: Config, listener: Listener) -> list[str]:
    raw = setting(config, listener, "sasl.enabled.mechanisms")
    names = [m.strip().upper() for m in raw.split(",") if m.strip()]
    if not names:
        raise ConfigError(f"listener {listener.name}: sasl.enabled.mechanisms is empty")
    unknown = [m for m in names if m not in SUPPORTED]
    if unknown:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported here "
            f"({', '.join(SUPPORTED)})"
        )
    return names


class UserStore:
    """PLAIN passwords (JAAS, --user) and SCRAM credentials (those, and the metadata log)."""

    def __init__(self) -> None:
        self.plain: dict[str, str] = {}
        self.scram: dict[str, dict[str, ScramCredential]] = {m: {} for m in SCRAM}

    def __repr__(self) -> str:
        return f"UserStore({len(self.plain)} PLAIN, {sum(map(len, self.scram.values()))} SCRAM)"

    def add(
        self, user: str, password: str, plain: bool = True, scram: tuple[str, ...] = SCRAM
    ) -> None:
        from minicoord.server.security.scram import make_credential

        if plain:
            self.plain[user] = password
        for mechanism in scram:
            self.scram[mechanism][user] = make_credential(mechanism, password)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.scram.get(mechanism, {}).get(user)

    def check_plain(self, user: str, password: str) -> bool:
        expected = self.plain.get(user)
        # Compared in constant time, and against something even for an unknown user.
        ok = hmac.compare_digest((expected or "\x00").encode(), password.encode())
        return expected is not None and ok


def load_users(config: Config, extra: list[tuple[str, str]] = ()) -> UserStore:  # type: ignore[assignment]
    """Users of every JAAS string the config holds, and `extra` (name, password) pairs."""
    from minicoord.server.security import jaas

    store = UserStore()
    texts: list[tuple[str, str]] = []
    if config.sasl_jaas_config:
        texts.append(("", config.sasl_jaas_config))
    for key, value in config.listener_overrides:
        if key.lower().endswith(".sasl.jaas.config"):
            texts.append((key.lower(), value))
    for key, text in texts:
        scram_only = tuple(m for m in SCRAM if f".{m.lower()}." in key) or SCRAM
        for module in jaas.parse(text):
            if module.name == jaas.PLAIN_MODULE:
                for user, password in module.users.items():
                    store.plain[user] = password
            elif module.name == jaas.SCRAM_MODULE:
                for user, password in module.users.items():
                    store.add(user, password, plain=False, scram=scram_only)
    for user, password in extra:
        store.add(user, password)
    return store


@dataclass
class SaslSettings:
    """What one SASL listener accepts."""

    mechanisms: list[str]
    users: UserStore
    oauth: UnsecuredValidator | None = None
    reauth_ms: int = 0
    max_receive: int = 524_288


def settings_for(config: Config, listener: Listener, users: UserStore) -> SaslSettings:
    mechanisms = enabled_mechanisms(config, listener)
    oauth = None
    if "OAUTHBEARER" in mechanisms:
        from minicoord.server.security import jaas
        from minicoord.server.security.oauth import UnsecuredValidator

        options: dict[str, str] = {}
        text = mechanism_setting(config, listener, "OAUTHBEARER", "sasl.jaas.config")
        if text:
            for module in jaas.parse(text):
                if module.name == jaas.OAUTH_MODULE:
                    options = module.options
        oauth = UnsecuredValidator.from_options(options)
    reauth = setting(config, listener, "connections.max.reauth.ms")
    max_receive = setting(config, listener, "sasl.server.max.receive.size")
    return SaslSettings(mechanisms, users, oauth, int(reauth or 0), int(max_receive or 524_288))


def check_config(config: Config) -> None:
    for listener in listeners_of(config):
        if listener.sasl:
            enabled_mechanisms(config, listener)


class State(Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE = "HANDSHAKE_REQUEST"
    REAUTH_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class Refused(Exception):
    """Authentication failed: `message` is what Kafka tells the client."""


@dataclass
class Authenticator:
    settings: SaslSettings
    # (mechanism, principal) of the session being re-authenticated, if it is one.
    previous: tuple[str, str] | None = None
    state: State = State.HANDSHAKE_OR_VERSIONS
    mechanism: str | None = None
    # After a v0 handshake the tokens travel raw, without Kafka request headers.
    raw: bool = False
    client_supports_reauth: bool = False
    principal: str | None = None
    _exchange: object = field(default=None, repr=False)
    _credential_expiry_ms: int | None = None

    def __post_init__(self) -> None:
        if self.previous is not None:
            self.state = State.REAUTH_HANDSHAKE

    @property
    def what(self) -> str:
        return "re-authentication" if self.previous is not None else "authentication"

    def api_versions_allowed(self) -> bool:
        if self.state is State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE
            return True
        return False

    def handshake_allowed(self) -> bool:
        return self.state in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE, State.REAUTH_HANDSHAKE)

    def handshake(self, version: int, mechanism: str) -> bool:
        """Whether the mechanism is enabled; the state moves on (or to FAILED)."""
        self.raw = version == 0
        if mechanism not in self.settings.mechanisms:
            self.state = State.FAILED
            return False
        self.mechanism = mechanism
        if self.previous is not None and mechanism != self.previous[0]:
            self.state = State.REAUTH_BAD_MECHANISM
            return True
        self.state = State.AUTHENTICATE
        self._exchange = self._new_exchange(mechanism)
        return True

    def _new_exchange(self, mechanism: str) -> object:
        if mechanism in SCRAM:
            from minicoord.server.security.scram import ScramExchange

            return ScramExchange(mechanism, self.settings.users.scram_credential)
        if mechanism == "OAUTHBEARER":
            from minicoord.server.security.oauth import OAuthExchange

            assert self.settings.oauth is not None
            return OAuthExchange(self.settings.oauth)
        return None  # PLAIN: one token, checked in place

    def token(self, data: bytes, version: int = 0) -> bytes:
        """The answer to one client token; Refused to fail. COMPLETE when done."""
        if self.state is State.REAUTH_BAD_MECHANISM:
            self.state = State.FAILED
            raise Refused(
                f"SASL mechanism '{self.mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.previous[0] if self.previous else ''}'"
            )
        if self.state is not State.AUTHENTICATE:
            self.state = State.FAILED
            raise Refused(f"Unexpected SASL token in state {self.state.value}")
        if version > 0:
            self.client_supports_reauth = True
        try:
            answer, user = self._evaluate(data)
        except Refused:
            self.state = State.FAILED
            raise
        if user is not None:
            principal = "User:" + user
            if self.previous is not None and principal != self.previous[1]:
                self.state = State.FAILED
                old, new = self.previous[1].split(":", 1), principal.split(":", 1)
                raise Refused(
                    "Cannot change principals during re-authentication from "
                    f"{old[0]}.{old[1]}: {new[0]}.{new[1]}"
                )
            self.principal = principal
            self.state = State.COMPLETE
        return answer

    def _evaluate(self, data: bytes) -> tuple[bytes, str | None]:
        mechanism = self.mechanism
        if mechanism == "PLAIN":
            return b"", self._plain(data)
        if mechanism in SCRAM:
            from minicoord.server.security.scram import ScramExchange, ScramFailed

            exchange = self._exchange
            assert isinstance(exchange, ScramExchange)
            try:
                answer = exchange.step(data)
            except ScramFailed as exc:
                message = str(exc)
                if not message.startswith("Authentication failed: Client requested"):
                    # Kafka never says why (it could tell whether a user exists).
                    message = (
                        f"Authentication failed during {self.what} due to invalid credentials "
                        f"with SASL mechanism {mechanism}"
                    )
                raise Refused(message) from None
            return answer, exchange.username if exchange.complete else None
        from minicoord.server.security.oauth import OAuthExchange, OAuthFailed

        oauth = self._exchange
        assert isinstance(oauth, OAuthExchange)
        try:
            answer = oauth.step(data)
        except OAuthFailed as exc:
            raise Refused(str(exc)) from None
        if oauth.complete:
            self._credential_expiry_ms = oauth.expiry_ms
            return answer, oauth.username
        return answer, None

    def _plain(self, data: bytes) -> str:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused("Authentication failed: Invalid username or password") from None
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise Refused(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        if not user:
            raise Refused("Authentication failed: username not specified")
        if not password:
            raise Refused("Authentication failed: password not specified")
        if not self.settings.users.check_plain(user, password):
            raise Refused("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise Refused(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        return user

    def session_lifetime_ms(self, now_ms: int) -> int:
        """Kafka's session lifetime at completion: 0 is none (never expires)."""
        reauth = self.settings.reauth_ms
        expiry = self._credential_expiry_ms
        if expiry is None:
            return max(reauth, 0)
        left = max(expiry - now_ms, 0)
        return min(left, reauth) if reauth > 0 else left

    def has_lifetime(self) -> bool:
        return self.settings.reauth_ms > 0 or self._credential_expiry_ms is not None
