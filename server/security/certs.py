"""`minicoord certs DIR`: throwaway TLS material for tests, made with `cryptography`.

Writes ca.pem (the CA certificate), server.pem (server key + certificate, SAN 127.0.0.1 and
localhost: a PEM key store as ssl.keystore.location takes it), server.key and server.crt
apart, client.key / client.crt / client.pem (CN=client,O=minicoord), and a second CA's client
(other-ca.pem, other-client.key, other-client.crt) that the server must refuse.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass


@dataclass(frozen=True)
class CertFiles:
    dir: Path
    ca: Path
    server_keystore: Path
    server_key: Path
    server_cert: Path
    client_key: Path
    client_cert: Path
    client_keystore: Path
    other_ca: Path
    other_client_key: Path
    other_client_cert: Path


def _name(cn: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "minicoord"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    # P-256: fast to make and to handshake with, and every client's TLS library takes it.
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: Any, key: Any, issuer: Any, issuer_key: Any, ca: bool, sans: list[Any]) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_cert(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)  # type: ignore[no-any-return]


def write_certs(directory: str | Path) -> CertFiles:
    from cryptography import x509

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca_name, other_name = _name("minicoord test CA"), _name("minicoord other CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, True, [])
    other_ca = _cert(other_name, other_key, other_name, other_key, True, [])
    server_key = _key()
    sans = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    server = _cert(_name("localhost"), server_key, ca_name, ca_key, False, sans)
    client_key = _key()
    client = _cert(_name("client"), client_key, ca_name, ca_key, False, [])
    stranger_key = _key()
    stranger = _cert(_name("client"), stranger_key, other_name, other_key, False, [])
    files = CertFiles(
        out,
        out / "ca.pem",
        out / "server.pem",
        out / "server.key",
        out / "server.crt",
        out / "client.key",
        out / "client.crt",
        out / "client.pem",
        out / "other-ca.pem",
        out / "other-client.key",
        out / "other-client.crt",
    )
    writes = {
        files.ca: _pem_cert(ca),
        files.server_key: _pem_key(server_key),
        files.server_cert: _pem_cert(server) + _pem_cert(ca),
        files.server_keystore: _pem_key(server_key) + _pem_cert(server) + _pem_cert(ca),
        files.client_key: _pem_key(client_key),
        files.client_cert: _pem_cert(client),
        files.client_keystore: _pem_key(client_key) + _pem_cert(client),
        files.other_ca: _pem_cert(other_ca),
        files.other_client_key: _pem_key(stranger_key),
        files.other_client_cert: _pem_cert(stranger),
    }
    for path, data in writes.items():
        path.write_bytes(data)
        if path.name.endswith((".key", "server.pem", "client.pem")):
            os.chmod(path, 0o600)
    return files
