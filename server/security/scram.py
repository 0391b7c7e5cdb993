"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, Kafka's KIP-84): the server's exchange, as Kafka's
ScramSaslServer runs it, and the credentials.

A credential is what Kafka keeps in its metadata log (UserScramCredentialRecord): salt,
StoredKey, ServerKey and iteration count, never the password. Users given as passwords
(JAAS, --user) are turned into one on the spot. The exchange is Kafka's own rather than a
SCRAM library's: Kafka accepts the salt an admin client chose, of any length (sarama's callers
pick theirs), where `scramp` refuses one under 12 bytes; and Kafka's messages, nonce rule and
checks are what clients meet.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable

from minicoord.protocol.lean_dataclass import dataclass

MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # Kafka's ScramMechanism type ids
BY_TYPE = {v: k for k, v in MECHANISMS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's bounds on the iteration count of a credential (ScramMechanism.minIterations, and the
# AlterUserScramCredentials limit).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramFailed(Exception):
    """Authentication failed; `message` is what Kafka tells the client (nothing secret)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are as good as a password to an attacker: never print
        return f"ScramCredential(iterations={self.iterations})"


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    # ScramFormatter's: a random salt, the password's UTF-8 bytes salted (Kafka applies no
    # SASLprep either).
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)
    return from_salted_password(mechanism, salt, salted, iterations)


def from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential of AlterUserScramCredentials' upsertion (the client salted it)."""
    name = _HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", name)
    return ScramCredential(salt, stored_key, server_key, iterations)


# ScramMessages' grammar (its regular expressions, with Java's class intersections spelled
# out): the client's first and final messages must match whole.
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"  # [\x01-\x7F] but ','
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"  # [\x21-\x7E] but ','
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # but ',' and '=' unescaped
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)


def _username(saslname: str) -> str:
    """ScramFormatter.username: `=2C` is ',' and `=3D` is '='; any other '=' is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ScramFailed(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


class ScramExchange:
    """One SCRAM authentication: client-first, then client-final (ScramSaslServer)."""

    def __init__(
        self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]
    ) -> None:
        self.mechanism = mechanism
        self.username: str | None = None
        self.complete = False
        self._lookup = lookup
        self._hash = _HASHES[mechanism]
        self._step = 0
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def step(self, token: bytes) -> bytes:
        """The server's next message; ScramFailed when the client cannot be let in."""
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailed("Invalid SCRAM message: not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._client_first(text)
        if self._step == 1:
            self._step = 2
            return self._client_final(text)
        raise ScramFailed("Unexpected challenge in Sasl server state COMPLETE")

    def _client_first(self, text: str) -> bytes:
        first = _CLIENT_FIRST.fullmatch(text)
        if first is None:
            raise ScramFailed(f"Invalid SCRAM client first message format: {text}")
        name = _username(first["saslname"])
        credential = self._lookup(self.mechanism, name)
        if credential is None:
            raise ScramFailed("Authentication failed: Invalid user credentials")
        if first["authzid"] and first["authzid"] != name:
            raise ScramFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise ScramFailed(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}"
            )
        self.username = name
        self._credential = credential
        # The bare message as Kafka rebuilds it from what it parsed (what the proof covers).
        self._client_first_bare = f"n={first['saslname']},r={first['nonce']}" + (
            first["extensions"] or ""
        )
        # ScramFormatter.secureRandomString: 130 random bits in base 36.
        self._nonce = first["nonce"] + _base36(secrets.randbits(130))
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        final = _CLIENT_FINAL.fullmatch(text)
        if final is None:
            raise ScramFailed(f"Invalid SCRAM client final message format: {text}")
        # Kafka's rule: the nonce ends with the server's (older librdkafka, Debian's kcat,
        # repeats its own in front; the proof still covers the message as sent).
        if not final["nonce"].endswith(self._nonce):
            raise ScramFailed("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        without_proof = f"c={final['channel']},r={final['nonce']}"
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        proof = base64.b64decode(final["proof"])
        if len(proof) != len(signature):
            raise ScramFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise ScramFailed("Invalid client credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        self._credential = None
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, d = divmod(n, 36)
        out = digits[d] + out
    return out or "0"
