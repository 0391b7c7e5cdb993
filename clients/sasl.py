"""Client side of SASL for minicoord's own tools (bench, doctor): SaslHandshake v1 then
SaslAuthenticate v2, PLAIN or SCRAM (scramp's client)."""

from __future__ import annotations

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from minicoord.clients.connection import ProtocolClient


class AuthenticationFailed(Exception):
    pass


async def authenticate(client: ProtocolClient, mechanism: str, user: str, password: str) -> int:
    """Log in; the session lifetime the server gives (0: none). AuthenticationFailed if not."""
    shake = await client.request(SaslHandshakeRequest(version=1, mechanism=mechanism), 1)
    if shake.error_code:
        raise AuthenticationFailed(f"SaslHandshake error {shake.error_code}: {shake.mechanisms}")

    async def step(token: bytes) -> bytes:
        answer = await client.request(SaslAuthenticateRequest(version=2, auth_bytes=token), 2)
        if answer.error_code:
            raise AuthenticationFailed(answer.error_message or f"error {answer.error_code}")
        step.lifetime = answer.session_lifetime_ms  # type: ignore[attr-defined]
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        await step(f"\x00{user}\x00{password}".encode())
    elif mechanism.startswith("SCRAM-"):
        import scramp

        scram = scramp.ScramClient([mechanism], user, password)
        scram.set_server_first((await step(scram.get_client_first().encode())).decode())
        scram.set_server_final((await step(scram.get_client_final().encode())).decode())
    else:
        raise AuthenticationFailed(f"mechanism {mechanism} is not supported by this client")
    return int(step.lifetime)  # type: ignore[attr-defined]
