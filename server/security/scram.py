"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, Kafka's KIP-84) on `scramp`, and the credentials.

A credential is what Kafka keeps in its metadata log (UserScramCredentialRecord): salt,
StoredKey, ServerKey and iteration count, never the password. Users given as passwords
(JAAS, --user) are turned into one on the spot.
"""

from __future__ import annotations

import hashlib
import hmac
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
    import scramp

    salt, stored, server, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations
    )
    return ScramCredential(salt, stored, server, count)


def from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential of AlterUserScramCredentials' upsertion (the client salted it)."""
    name = _HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", name)
    return ScramCredential(salt, stored_key, server_key, iterations)


def _client_nonce(client_final: str) -> str | None:
    for part in client_final.split(","):
        if part.startswith("r="):
            return part[2:]
    return None


class ScramExchange:
    """One SCRAM authentication: client-first, then client-final."""

    def __init__(
        self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]
    ) -> None:
        import scramp

        self.mechanism = mechanism
        self.username: str | None = None
        self.complete = False
        self._lookup = lookup
        self._step = 0
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        # SCRAM's saslname escapes ',' and '=' (RFC 5802 5.1).
        name = username.replace("=2C", ",").replace("=3D", "=")
        credential = self._lookup(self.mechanism, name)
        if credential is None:
            raise ScramFailed("Authentication failed: Invalid user credentials")
        self.username = name
        c = credential
        return c.salt, c.stored_key, c.server_key, c.iterations

    def step(self, token: bytes) -> bytes:
        """The server's next message; ScramFailed when the client cannot be let in."""
        import scramp

        try:
            text = token.decode("utf-8")
            if self._step == 0:
                self._step = 1
                gs2 = text.split(",", 2)
                if len(gs2) == 3 and gs2[1].startswith("a="):
                    authzid = gs2[1][2:]
                    user = gs2[2].split(",", 1)[0].removeprefix("n=")
                    if authzid != user:
                        raise ScramFailed(
                            "Authentication failed: Client requested an authorization id "
                            "that is different from username"
                        )
                self._server.set_client_first(text)
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._step = 2
                self._tolerate_doubled_nonce(text)
                self._server.set_client_final(text)
                final = self._server.get_server_final()
                self.complete = True
                return str(final).encode()
        except ScramFailed:
            raise
        except (scramp.ScramException, UnicodeDecodeError, ValueError) as exc:
            raise ScramFailed(str(type(exc).__name__)) from None
        raise ScramFailed("Unexpected challenge in Sasl server state COMPLETE")

    def _tolerate_doubled_nonce(self, client_final: str) -> None:
        """Kafka checks only that the final message's nonce *ends with* the server's; older
        librdkafka (Debian's kcat) repeats its own nonce in front. The proof is computed over
        the message as sent, so it still verifies: accept the nonce it echoes, as Kafka does."""
        server = self._server
        echoed = _client_nonce(client_final)
        expected = str(server.nonce)
        if echoed is not None and echoed != expected and echoed.endswith(expected):
            server.nonce = type(server.nonce)(echoed)
