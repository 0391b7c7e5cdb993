"""OAUTHBEARER unsecured tokens as Kafka's default validator takes them, and session
lifetimes / re-authentication (KIP-368) as Kafka answers them, over raw sockets."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import MetadataRequest
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import EmbeddedServer, running
from rawkit import Raw, plain_token

OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredValidatorPrincipalClaimName="azp" unsecuredValidatorRequiredScope="kafka";'
)


def jwt(claims: dict[str, object], alg: str = "none") -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}."


def bearer(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


@pytest.fixture(scope="module")
def sessions() -> Iterator[EmbeddedServer]:
    configs = {
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "connections.max.reauth.ms": 1500,
        "listener.name.scoped.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,SCOPED:SASL_PLAINTEXT",
    }
    listeners = "SASL_PLAINTEXT://127.0.0.1:0,SCOPED://127.0.0.1:0"
    with running(configs, listeners=listeners, users={"alice": "a-pw", "bob": "b-pw"}) as s:
        yield s


def _login(raw: Raw, user: str, password: str) -> int:
    assert raw.handshake("PLAIN").error_code == 0
    answer = raw.authenticate(plain_token(user, password))
    assert answer.error_code == 0, answer
    return answer.session_lifetime_ms


def test_an_unsecured_token_authenticates_with_its_subject(sessions: EmbeddedServer) -> None:
    raw = Raw(sessions.address_of("SASL_PLAINTEXT"))
    assert raw.handshake("OAUTHBEARER").error_code == 0
    exp = time.time() + 60
    answer = raw.authenticate(bearer(jwt({"sub": "carol", "exp": exp, "iat": int(time.time())})))
    assert answer.error_code == 0
    # The session ends with the token or connections.max.reauth.ms, whichever is first.
    assert answer.session_lifetime_ms == 1500
    assert "User:carol" in sessions.call(
        lambda: {c.principal for c in sessions.server.broker.connections}
    )
    raw.close()


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "carol", "exp": time.time() - 10},  # expired
        {"sub": "carol"},  # no exp
        {"exp": time.time() + 60},  # no subject
    ],
    ids=["expired", "no-exp", "no-sub"],
)
def test_a_bad_token_gets_kafkas_error_challenge_then_the_refusal(
    sessions: EmbeddedServer, claims: dict[str, object]
) -> None:
    raw = Raw(sessions.address_of("SASL_PLAINTEXT"))
    assert raw.handshake("OAUTHBEARER").error_code == 0
    challenge = raw.authenticate(bearer(jwt(claims)))
    assert challenge.error_code == 0
    assert json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
    refused = raw.authenticate(b"\x01")
    assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert refused.error_message == '{"status":"invalid_token"}'
    assert raw.closed_by_server()


def test_a_signed_token_is_not_unsecured(sessions: EmbeddedServer) -> None:
    raw = Raw(sessions.address_of("SASL_PLAINTEXT"))
    assert raw.handshake("OAUTHBEARER").error_code == 0
    challenge = raw.authenticate(bearer(jwt({"sub": "x", "exp": time.time() + 60}, alg="HS256")))
    assert json.loads(challenge.auth_bytes) == {"status": "invalid_token"}


def test_principal_claim_and_required_scope_from_the_jaas_options(
    sessions: EmbeddedServer,
) -> None:
    exp = time.time() + 60
    raw = Raw(sessions.address_of("SCOPED"))
    assert raw.handshake("OAUTHBEARER").error_code == 0
    answer = raw.authenticate(bearer(jwt({"azp": "svc", "exp": exp, "scope": "kafka other"})))
    assert (answer.error_code, answer.auth_bytes) == (0, b"")
    raw.close()
    raw = Raw(sessions.address_of("SCOPED"))
    assert raw.handshake("OAUTHBEARER").error_code == 0
    challenge = raw.authenticate(bearer(jwt({"azp": "svc", "exp": exp, "scope": "other"})))
    assert json.loads(challenge.auth_bytes) == {"status": "insufficient_scope", "scope": "kafka"}


def test_reauthentication_renews_the_session_and_keeps_the_principal(
    sessions: EmbeddedServer,
) -> None:
    raw = Raw(sessions.address_of("SASL_PLAINTEXT"))
    assert _login(raw, "alice", "a-pw") == 1500
    assert raw.metadata().brokers
    # Re-authenticating the same principal: a new session.
    assert _login(raw, "alice", "a-pw") == 1500
    assert raw.metadata().brokers
    # Another principal is refused, and the connection closed.
    assert raw.handshake("PLAIN").error_code == 0
    refused = raw.authenticate(plain_token("bob", "b-pw"))
    assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert refused.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert raw.closed_by_server()


def test_an_expired_session_is_closed_at_its_next_request(sessions: EmbeddedServer) -> None:
    raw = Raw(sessions.address_of("SASL_PLAINTEXT"))
    assert _login(raw, "bob", "b-pw") == 1500
    time.sleep(1.7)
    raw.send(MetadataRequest(version=1, topics=[]), 1)
    assert raw.closed_by_server()


def test_reauthentication_is_refused_without_a_session_lifetime() -> None:
    with running(listeners="SASL_PLAINTEXT://127.0.0.1:0", users={"alice": "a-pw"}) as server:
        raw = Raw(server.address_of("SASL_PLAINTEXT"))
        assert _login(raw, "alice", "a-pw") == 0
        assert raw.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.metadata().brokers
