"""Security settings of an embedded server, and the client settings that go with them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tempfile import TemporaryDirectory

    from minicoord.server.security.certs import CertFiles
    from minicoord.testing.embedded import EmbeddedServer

# A `minicoord certs` directory's files (server/security/certs.py: CertFiles).
TlsFiles = Any


def _tls_files(
    tls: Any, settings: dict[str, str], listeners: str | None
) -> tuple[CertFiles | None, TemporaryDirectory[str] | None]:
    """The certificate files to serve TLS with: given, or made when a TLS listener needs them;
    and, for made ones, the temporary directory that holds them.

    The caller keeps that directory for as long as the files may be used (an embedded server
    may be started again after a stop): it is removed, private keys and all, once the caller
    lets it go, or at exit.
    """
    wants_tls = "SSL" in (listeners or settings.get("listeners", "")).upper()
    if tls is None and not wants_tls:
        return None, None  # and cryptography stays unloaded
    from minicoord.server.security.certs import CertFiles, write_certs

    if isinstance(tls, CertFiles):
        return tls, None
    if tls is not None:
        directory = Path(tls)
        if (directory / "ca.pem").exists():
            return _files_in(directory), None
        return write_certs(directory), None
    if "ssl.keystore.location" not in settings:
        from tempfile import TemporaryDirectory

        made = TemporaryDirectory(prefix="minicoord-certs-")
        return write_certs(made.name), made
    return None, None


def _files_in(directory: Path) -> CertFiles:
    from minicoord.server.security.certs import CertFiles

    names = [
        "ca.pem",
        "server.pem",
        "server.key",
        "server.crt",
        "client.key",
        "client.crt",
        "client.pem",
        "other-ca.pem",
        "other-client.key",
        "other-client.crt",
    ]
    return CertFiles(directory, *(directory / n for n in names))


def security_configs(
    settings: dict[str, str],
    listeners: str | None,
    tls: CertFiles | None,
    ssl_client_auth: str | None,
) -> dict[str, str]:
    out = dict(settings)
    if listeners:
        out["listeners"] = listeners
    if tls is not None:
        out.setdefault("ssl.keystore.location", str(tls.server_keystore))
        out.setdefault("ssl.truststore.location", str(tls.ca))
    if ssl_client_auth:
        out["ssl.client.auth"] = ssl_client_auth
    return out


@dataclass(frozen=True)
class ClientSettings:
    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __repr__(self) -> str:  # no password in a test's failure output
        return (
            f"ClientSettings({self.bootstrap}, {self.security_protocol}, "
            f"{self.sasl_mechanism}, user={self.username})"
        )

    def confluent(self) -> dict[str, Any]:
        """librdkafka (confluent-kafka) properties."""
        out: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            out["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "OAUTHBEARER":
                out["enable.sasl.oauthbearer.unsecure.jwt"] = True
                out["sasl.oauthbearer.config"] = f"principal={self.username}"
            else:
                out["sasl.username"] = self.username
                out["sasl.password"] = self.password
        if self.ca_file:
            out["ssl.ca.location"] = self.ca_file
        if self.cert_file:
            out["ssl.certificate.location"] = self.cert_file
            out["ssl.key.location"] = self.key_file
        return out

    def kafka_python(self) -> dict[str, Any]:
        """kafka-python keyword arguments."""
        out: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            out["sasl_mechanism"] = self.sasl_mechanism
            out["sasl_plain_username"] = self.username
            out["sasl_plain_password"] = self.password
        if self.ca_file:
            out["ssl_cafile"] = self.ca_file
        if self.cert_file:
            out["ssl_certfile"] = self.cert_file
            out["ssl_keyfile"] = self.key_file
        return out

    def aiokafka(self) -> dict[str, Any]:
        """aiokafka keyword arguments (an ssl_context built from the files)."""
        out: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            out["sasl_mechanism"] = self.sasl_mechanism
            out["sasl_plain_username"] = self.username
            out["sasl_plain_password"] = self.password
        if self.ca_file:
            import ssl

            context = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                context.load_cert_chain(self.cert_file, self.key_file)
            out["ssl_context"] = context
        return out


def client_settings(
    embedded: EmbeddedServer,
    listener: str | None,
    user: str | None,
    mechanism: str | None,
    client_cert: bool,
) -> ClientSettings:
    server = embedded.server
    chosen = server.listeners[0]
    if listener is not None:
        matches = [lst for lst in server.listeners if lst.name == listener.upper()]
        if not matches:
            names = ", ".join(lst.name for lst in server.listeners)
            raise ValueError(f"no listener {listener}; this server has {names}")
        chosen = matches[0]
    tls = embedded.tls
    if chosen.sasl and mechanism is None:
        mechanism = "PLAIN"
    if chosen.sasl and user is None and embedded.users:
        user = next(iter(embedded.users))
    if user is not None and user not in embedded.users:
        # Settings without a password would fail the login with nothing said about why.
        known = ", ".join(embedded.users) or "none (give users=)"
        raise ValueError(f"no user {user!r} on this server; its users: {known}")
    return ClientSettings(
        server.address_of(chosen.name),
        chosen.protocol,
        mechanism if chosen.sasl else None,
        user if chosen.sasl else None,
        embedded.users.get(user or "") if chosen.sasl else None,
        str(tls.ca) if chosen.tls and tls is not None else None,
        str(tls.client_cert) if client_cert and tls is not None else None,
        str(tls.client_key) if client_cert and tls is not None else None,
    )
