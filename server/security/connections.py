"""Connections of SSL and SASL listeners: KafkaConnection with a principal, and a SASL gate.

PLAINTEXT listeners keep plain KafkaConnection and pay nothing for any of this. A SASL
connection sends its frames through the gate (sasl.Authenticator) until it has authenticated;
after that, one attribute test per request (is there a session lifetime?) and then the
ordinary path.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.headers import (
    MalformedHeader,
    RequestHeader,
    parse_request_header,
    skip_tagged_fields,
)
from minicoord.server.answers import encode_response
from minicoord.server.broker import Broker
from minicoord.server.connection import KafkaConnection
from minicoord.server.handlers.base import ANONYMOUS
from minicoord.server.security.sasl import Authenticator, Refused, SaslSettings, State
from minicoord.server.security.tls import principal_of

log = logging.getLogger("minicoord.security")

_SIZE = struct.Struct(">i")
API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_HANDSHAKE_KEY = struct.pack(">h", SASL_HANDSHAKE)


class TlsConnection(KafkaConnection):
    """An SSL listener's connection: its principal is its client certificate's subject."""

    __slots__ = ("principal",)

    def __init__(
        self, broker: Broker, listener: str = "SSL", advertised: tuple[str, int] | None = None
    ) -> None:
        super().__init__(broker, listener, advertised)
        self.principal = ANONYMOUS

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.closed:
            return
        principal = principal_of(transport.get_extra_info("ssl_object"))
        if principal is not None:
            self.principal = principal


class SaslConnection(KafkaConnection):
    __slots__ = ("_auth", "_expires_at", "_mechanism", "_reauth_ok", "_sasl", "principal")

    def __init__(
        self,
        broker: Broker,
        settings: SaslSettings,
        listener: str = "SASL_PLAINTEXT",
        advertised: tuple[str, int] | None = None,
    ) -> None:
        super().__init__(broker, listener, advertised)
        self.principal = ANONYMOUS
        self._sasl = settings
        self._auth: Authenticator | None = Authenticator(settings)
        # time.monotonic() past which the session serves nothing but re-authentication.
        self._expires_at: float | None = None
        self._mechanism: str | None = None
        self._reauth_ok = False
        # Kafka's sasl.server.max.receive.size: an unauthenticated client cannot make the
        # server buffer a big frame.
        self.set_frame_limit(settings.max_receive)

    def _dispatch(self, frame: bytes) -> None:
        if self._auth is None:
            if self._expires_at is None or not self._session_check(frame):
                super()._dispatch(frame)
            return
        self._gate(frame)

    def _session_check(self, frame: bytes) -> bool:
        """Re-authentication or an expired session: True if the frame was dealt with here."""
        assert self._expires_at is not None
        if frame[:2] == _HANDSHAKE_KEY and self._reauth_ok:
            assert self._mechanism is not None
            self._auth = Authenticator(self._sasl, previous=(self._mechanism, self.principal))
            self._gate(frame)
            return True
        if time.monotonic() > self._expires_at:
            self.abort("SASL session expired (connections.max.reauth.ms) without re-authentication")
            return True
        return False

    # -- before authentication ------------------------------------------------------------

    def _gate(self, frame: bytes) -> None:
        auth = self._auth
        assert auth is not None
        if auth.raw and auth.state in (State.AUTHENTICATE, State.REAUTH_BAD_MECHANISM):
            # After a v0 handshake: a bare token in, a bare size-prefixed token out.
            try:
                answer = auth.token(bytes(frame))
            except Refused as exc:
                self._refused(auth, str(exc))
                return
            self._enqueue(_SIZE.pack(len(answer)) + answer)
            if auth.state is State.COMPLETE:
                self._authenticated(auth)
            return
        phase = "authentication" if auth.state is State.AUTHENTICATE else "handshake"
        try:
            header, pos = parse_request_header(frame)
        except MalformedHeader:
            self.abort(f"not a Kafka request during SASL {phase}")
            return
        self._note_client_id(header.client_id)  # the close's log line names the client
        key = header.api_key
        if key == API_VERSIONS:
            if auth.api_versions_allowed():
                super()._dispatch(frame)
            else:
                self.abort(f"Unexpected ApiVersions request during SASL {phase}")
            return
        if key == SASL_HANDSHAKE and auth.handshake_allowed():
            request = self._decode(header, frame, pos)
            if request is not None:
                self._handshake(auth, header, request)
            return
        if (
            key == SASL_AUTHENTICATE
            and not auth.raw
            and auth.state in (State.AUTHENTICATE, State.REAUTH_BAD_MECHANISM)
        ):
            request = self._decode(header, frame, pos)
            if request is not None:
                self._authenticate(auth, header, request)
            return
        name = _api_name(key)
        if auth.state is State.AUTHENTICATE and not auth.raw:
            # Kafka answers it with ILLEGAL_SASL_STATE where the request has room, then closes.
            self._illegal_state_answer(header, frame, pos)
        self.abort(f"Unexpected Kafka request of type {name} during SASL {phase}")

    def _decode(self, header: RequestHeader, frame: bytes, pos: int) -> Any:
        handler = self.broker.handlers.get(header.api_key)
        if handler is None or not handler.supports(header.api_version):
            self.abort(f"{_api_name(header.api_key)} v{header.api_version} is not a version served")
            return None
        spec = handler.spec
        try:
            if spec.request_flexible(header.api_version):
                pos = skip_tagged_fields(frame, pos)
            return spec.request.decode(memoryview(frame)[pos:], version=header.api_version)
        except Exception:
            # No detail: the frame may hold a password.
            self.abort(f"undecodable {spec.name} v{header.api_version} request")
            return None

    def _answer(self, header: RequestHeader, response: Any) -> None:
        handler = self.broker.handlers.get(header.api_key)
        assert handler is not None
        self._enqueue(
            encode_response(header.api_version, header.correlation_id, handler.spec, response)
        )

    def _handshake(self, auth: Authenticator, header: RequestHeader, request: Any) -> None:
        spec = self.broker.handlers.get(SASL_HANDSHAKE).spec  # type: ignore[union-attr]
        mechanism = request.mechanism or ""
        ok = auth.handshake(header.api_version, mechanism)
        error = ErrorCode.NONE if ok else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        response = spec.response(
            version=header.api_version, error_code=error, mechanisms=self._sasl.mechanisms
        )
        self._answer(header, response)
        if not ok:
            self.abort(
                f"Unsupported SASL mechanism {mechanism[:64]!r} "
                f"(sasl.enabled.mechanisms={','.join(self._sasl.mechanisms)})"
            )

    def _authenticate(self, auth: Authenticator, header: RequestHeader, request: Any) -> None:
        spec = self.broker.handlers.get(SASL_AUTHENTICATE).spec  # type: ignore[union-attr]
        version = header.api_version
        try:
            answer = auth.token(bytes(request.auth_bytes or b""), version)
        except Refused as exc:
            response = spec.response(
                version=version,
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=str(exc),
                auth_bytes=b"",
                session_lifetime_ms=0,
            )
            self._answer(header, response)
            self._refused(auth, str(exc))
            return
        lifetime = 0
        if auth.state is State.COMPLETE:
            lifetime = auth.session_lifetime_ms(self.broker.now())
        response = spec.response(
            version=version,
            error_code=ErrorCode.NONE,
            error_message=None,
            auth_bytes=answer,
            session_lifetime_ms=lifetime,
        )
        self._answer(header, response)
        if auth.state is State.COMPLETE:
            self._authenticated(auth, lifetime)

    def _illegal_state_answer(self, header: RequestHeader, frame: bytes, pos: int) -> None:
        from minicoord.server.faults import can_fail, error_response

        handler = self.broker.handlers.get(header.api_key)
        if handler is None or not handler.supports(header.api_version):
            return
        if not can_fail(header.api_key, header.api_version):
            return
        try:
            spec = handler.spec
            if spec.request_flexible(header.api_version):
                pos = skip_tagged_fields(frame, pos)
            request = spec.request.decode(memoryview(frame)[pos:], version=header.api_version)
            response = error_response(
                spec, header.api_version, request, ErrorCode.ILLEGAL_SASL_STATE
            )
            self._enqueue(
                encode_response(header.api_version, header.correlation_id, spec, response)
            )
        except Exception:
            return

    def _refused(self, auth: Authenticator, message: str) -> None:
        self.abort(f"SASL {auth.what} failed with {auth.mechanism}: {message}")

    def _authenticated(self, auth: Authenticator, lifetime_ms: int | None = None) -> None:
        if lifetime_ms is None:
            lifetime_ms = auth.session_lifetime_ms(self.broker.now())
        assert auth.principal is not None
        self.principal = auth.principal
        self._mechanism = auth.mechanism
        self._reauth_ok = auth.client_supports_reauth
        self._expires_at = time.monotonic() + lifetime_ms / 1000 if auth.has_lifetime() else None
        self._auth = None
        self.set_frame_limit(self.broker.config.socket_request_max_bytes)
        log.debug(
            "%s %s as %s with %s",
            self.peer,
            "re-authenticated" if auth.previous else "authenticated",
            auth.principal,
            auth.mechanism,
        )


def _api_name(key: int) -> str:
    from minicoord.server.request_log import api_name

    return api_name(key)
