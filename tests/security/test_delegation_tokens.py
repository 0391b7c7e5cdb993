"""Delegation tokens, through @platformatic/kafka's own implementations of the four token APIs
over every kind of listener: answered as a Kafka broker with tokens disabled (no
`delegation.token.secret.key`, its default) answers. Not allowed on PLAINTEXT or SSL without a
client certificate (timestamps -1); elsewhere DELEGATION_TOKEN_AUTH_DISABLED (timestamps 0),
after the owner's CreateTokens check and the renewers' type check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from minicoord.protocol.errors import ErrorCode
from minicoord.server.security.certs import CertFiles
from minicoord.testing.embedded import EmbeddedServer, running

pytestmark = pytest.mark.clients
HERE = Path(__file__).resolve().parent

NOT_ALLOWED = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
DISABLED = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
CERT_PRINCIPAL = ["User", "CN=client,O=minicoord"]


def tokens(
    server: EmbeddedServer,
    node_dir: Path,
    listener: str,
    user: str | None = None,
    mechanism: str | None = None,
    cert: bool = False,
    owner: list[str | None] | None = None,
    renewers: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """The four answers, as the client parsed them."""
    client = server.client(listener, user, mechanism, client_cert=cert)
    options = {
        "bootstrap": client.bootstrap,
        "ssl": None
        if client.ca_file is None
        else {"ca": client.ca_file, "cert": client.cert_file, "key": client.key_file},
        "sasl": None
        if client.sasl_mechanism is None
        else {
            "mechanism": client.sasl_mechanism,
            "username": client.username,
            "password": client.password,
        },
        "owner": owner,
        "renewers": [list(r) for r in renewers],
    }
    done = subprocess.run(
        ["node", str(HERE / "delegation_tokens.mjs"), str(node_dir), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    return json.loads(lines[-1])


def created(answer: dict[str, Any]) -> tuple[Any, ...]:
    c = answer["create"]
    return (
        c["errorCode"],
        [c["principalType"], c["principalName"]],
        [c["tokenRequesterPrincipalType"], c["tokenRequesterPrincipalName"]],
        [c["issueTimestampMs"], c["expiryTimestampMs"], c["maxTimestampMs"]],
        c["tokenId"],
        c["hmac"],
    )


def the_rest(answer: dict[str, Any]) -> list[Any]:
    return [
        [answer["renew"]["errorCode"], answer["renew"]["expiryTimestampMs"]],
        [answer["expire"]["errorCode"], answer["expire"]["expiryTimestampMs"]],
        [answer["describe"]["errorCode"], answer["describe"]["tokens"]],
    ]


def test_plaintext_refuses_every_token_request(secure: EmbeddedServer, node_clients: Path) -> None:
    answer = tokens(secure, node_clients, "PLAINTEXT")
    anonymous = ["User", "ANONYMOUS"]
    assert created(answer) == (NOT_ALLOWED, anonymous, anonymous, ["-1", "-1", "-1"], "", [])
    assert the_rest(answer) == [[NOT_ALLOWED, "-1"], [NOT_ALLOWED, "-1"], [NOT_ALLOWED, []]]


@pytest.mark.parametrize(
    ("listener", "mechanism", "cert", "principal"),
    [
        ("SASL_SSL", "PLAIN", False, ["User", "alice"]),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", False, ["User", "alice"]),
        ("SSL", None, True, CERT_PRINCIPAL),
    ],
    ids=["sasl_ssl-plain", "sasl_plaintext-scram512", "ssl-client-cert"],
)
def test_authenticated_channels_find_tokens_disabled(
    secure: EmbeddedServer,
    node_clients: Path,
    listener: str,
    mechanism: str | None,
    cert: bool,
    principal: list[str],
) -> None:
    answer = tokens(secure, node_clients, listener, "alice", mechanism, cert)
    assert created(answer) == (DISABLED, principal, principal, ["0", "0", "0"], "", [])
    assert the_rest(answer) == [[DISABLED, "0"], [DISABLED, "0"], [DISABLED, []]]


def test_renewers_must_be_users(secure: EmbeddedServer, node_clients: Path) -> None:
    answer = tokens(
        secure,
        node_clients,
        "SASL_PLAINTEXT",
        "alice",
        "PLAIN",
        owner=["User", "bob"],
        renewers=(("User", "carol"), ("Group", "ops")),
    )
    alice, bob = ["User", "alice"], ["User", "bob"]
    error = ErrorCode.INVALID_PRINCIPAL_TYPE
    assert created(answer) == (error, bob, alice, ["-1", "-1", "-1"], "", [])


def test_another_owner_needs_create_tokens_and_ssl_needs_a_certificate(
    certs: CertFiles, node_clients: Path
) -> None:
    with running(
        {"sasl.enabled.mechanisms": "PLAIN"},
        listeners="SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        users={"alice": "alice-pw", "carol": "carol-pw"},
        tls=certs,
        ssl_client_auth="none",
        acls=["allow User:alice CreateTokens user:User:bob"],
    ) as server:
        alice, bob, carol = ["User", "alice"], ["User", "bob"], ["User", "carol"]
        refused = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        for user, owner, expected in [
            ("alice", bob, (DISABLED, bob, alice, ["0", "0", "0"], "", [])),
            ("carol", bob, (refused, bob, carol, ["-1", "-1", "-1"], "", [])),
            # For oneself, no check: the requester may always ask.
            ("carol", carol, (DISABLED, carol, carol, ["0", "0", "0"], "", [])),
        ]:
            answer = tokens(server, node_clients, "SASL_PLAINTEXT", user, "PLAIN", owner=owner)
            assert created(answer) == expected, user
        # SSL without a client certificate: ANONYMOUS, as PLAINTEXT.
        answer = tokens(server, node_clients, "SSL")
        assert created(answer)[0] == NOT_ALLOWED
        assert the_rest(answer) == [[NOT_ALLOWED, "-1"], [NOT_ALLOWED, "-1"], [NOT_ALLOWED, []]]


def test_an_owner_named_without_a_type_is_refused_as_kafka_refuses_it(
    secure: EmbeddedServer, node_clients: Path
) -> None:
    # Kafka's KafkaPrincipal refuses a null type: its error answer names ANONYMOUS twice.
    answer = tokens(secure, node_clients, "SASL_PLAINTEXT", "alice", "PLAIN", owner=[None, "bob"])
    anonymous = ["User", "ANONYMOUS"]
    error = ErrorCode.UNKNOWN_SERVER_ERROR
    assert created(answer) == (error, anonymous, anonymous, ["-1", "-1", "-1"], "", [])
