"""TLS for SSL and SASL_SSL listeners from PEM files (or Kafka's inline PEM configs).

Kafka's PEM key store is one file holding the private key (encrypted under ssl.key.password,
or not) and the certificate chain; the trust store a file of CA certificates. TLS 1.2 and 1.3
only. A client certificate's subject becomes the principal, as Kafka's default principal
builder names it: "User:" + the subject DN in RFC 2253 form ("User:CN=client,O=minicoord").
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from minicoord.server.config import ConfigError
from minicoord.server.security.listeners import Listener, setting

if TYPE_CHECKING:
    from minicoord.server.config import Config

log = logging.getLogger("minicoord.connection")

_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(config: Config, listener: Listener) -> ssl.SSLContext:
    """The SSLContext of one listener (ConfigError for what cannot be loaded)."""
    get = lambda name: setting(config, listener, name)  # noqa: E731
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if get(kind).upper() != "PEM":
            raise ConfigError(f"{kind}={get(kind)}: only PEM stores are supported")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = {p.strip() for p in get("ssl.enabled.protocols").split(",") if p.strip()}
    if not protocols or not protocols <= {"TLSv1.2", "TLSv1.3"}:
        raise ConfigError("ssl.enabled.protocols takes TLSv1.2 and/or TLSv1.3")
    ctx.minimum_version = (
        ssl.TLSVersion.TLSv1_2 if "TLSv1.2" in protocols else ssl.TLSVersion.TLSv1_3
    )
    ctx.maximum_version = (
        ssl.TLSVersion.TLSv1_3 if "TLSv1.3" in protocols else ssl.TLSVersion.TLSv1_2
    )
    password = get("ssl.key.password") or None
    location = get("ssl.keystore.location")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        else:
            _load_inline_chain(
                ctx, get("ssl.keystore.certificate.chain"), get("ssl.keystore.key"), password
            )
        trust = get("ssl.truststore.location")
        inline_trust = get("ssl.truststore.certificates")
        if trust:
            ctx.load_verify_locations(cafile=trust)
        elif inline_trust:
            ctx.load_verify_locations(cadata=inline_trust)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {listener.name}: cannot load TLS material: {exc}") from None
    auth = get("ssl.client.auth").lower() or "none"
    # Kafka applies ssl.client.auth to SASL_SSL listeners only through a listener override;
    # a broker-wide `required` still lets SASL_SSL clients in without a certificate.
    if listener.protocol == "SASL_SSL" and not _overridden(config, listener, "ssl.client.auth"):
        auth = "none"
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none" and not (trust or inline_trust):
        raise ConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location")
    return ctx


def _overridden(config: Config, listener: Listener, name: str) -> bool:
    wanted = listener.prefix + name
    return any(key.lower() == wanted for key, _ in config.listener_overrides)


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    if not chain or not key:
        raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
    # The ssl module loads key material only from files: a private file, removed at once.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def principal_of(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """User:<subject DN, RFC 2253> of the client's certificate, or None without one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject
    return "User:" + subject.rfc4514_string()


class TlsServer:
    """A TLS listener that accepts its connections itself and awaits each one's handshake.

    The event loop's TLS server drops a failed handshake (a client that does not speak TLS,
    a missing or untrusted client certificate, a client gone mid-way) without a word. Here
    each accepted socket is handed to the loop's own TLS transport with
    `connect_accepted_socket`, which reports how its handshake ended, so such a client is
    closed with a log line naming it and the reason. Quacks as an asyncio Server for the app:
    `sockets`, `close()`, `wait_closed()`.
    """

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        context: ssl.SSLContext,
    ) -> None:
        sock.setblocking(False)
        self.sockets = [sock]
        self._factory = factory
        self._context = context
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        listening = self.sockets[0]
        while True:
            try:
                client, address = await loop.sock_accept(listening)
            except OSError as exc:  # out of file descriptors, say: keep serving the others
                log.warning("TLS listener %s: accept failed: %s", listening.getsockname(), exc)
                await asyncio.sleep(0.1)
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._handshake(client, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, client: socket.socket, address: tuple[str, int]) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self._factory, client, ssl=self._context
            )
        except (TimeoutError, OSError) as exc:
            log.warning(
                "closing connection from %s:%d: TLS handshake failed: %s",
                address[0],
                address[1],
                _why(exc),
            )
            client.close()

    def close(self) -> None:
        self._accepting.cancel()
        for handshake in list(self._handshakes):
            handshake.cancel()  # the loop closes a transport whose handshake is cancelled
        self.sockets[0].close()

    async def wait_closed(self) -> None:
        await asyncio.gather(self._accepting, *self._handshakes, return_exceptions=True)


def listening_socket(host: str | None, port: int) -> socket.socket:
    """A TCP socket listening on host:port (every address when host is empty)."""
    if host:
        return socket.create_server((host, port), backlog=1024)
    if socket.has_dualstack_ipv6():
        return socket.create_server(
            ("", port), family=socket.AF_INET6, backlog=1024, dualstack_ipv6=True
        )
    return socket.create_server(("", port), backlog=1024)


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        # e.g. WRONG_VERSION_NUMBER (not TLS), PEER_DID_NOT_RETURN_A_CERTIFICATE,
        # CERTIFICATE_VERIFY_FAILED
        return exc.reason or str(exc)
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "the client closed the connection"
    if isinstance(exc, TimeoutError) or "taking longer" in str(exc):
        return "no handshake within 60 s"
    return str(exc) or type(exc).__name__
