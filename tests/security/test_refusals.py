"""Each way in that Kafka refuses, refused as Kafka refuses it; the server keeps serving a
client authenticated before; and no password reaches any log line (text, JSON, request log)."""

from __future__ import annotations

import logging
import ssl
import struct
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import MetadataRequest
from minicoord.protocol.errors import ErrorCode
from minicoord.server.logfmt import JsonFormatter
from minicoord.server.security.certs import CertFiles
from minicoord.testing.embedded import EmbeddedServer, running
from rawkit import Closed, Raw, client_tls, plain_token
from seckit import LISTENERS, SECURE_CONFIGS, USERS

WRONG = "not-the-password-Hq3"


@pytest.fixture
def watched(caplog: pytest.LogCaptureFixture, certs: CertFiles) -> Iterator[EmbeddedServer]:
    # DEBUG before the start: the request log (minicoord.requests) is on only if so then.
    caplog.set_level(logging.DEBUG)
    with running(
        SECURE_CONFIGS, [("sec-topic", 1)], listeners=LISTENERS, users=USERS, tls=certs
    ) as server:
        yield server


def _no_secret_logged(caplog: pytest.LogCaptureFixture) -> None:
    json_format = JsonFormatter()
    secrets = [*USERS.values(), WRONG]
    for record in caplog.records:
        for text in (record.getMessage(), json_format.format(record)):
            for secret in secrets:
                assert secret not in text, f"{secret!r} logged: {text}"


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in list(caplog.records)]


def _authenticated(server: EmbeddedServer, certs: CertFiles) -> Raw:
    raw = Raw(server.address_of("SASL_SSL"), client_tls(str(certs.ca)))
    assert raw.handshake("PLAIN").error_code == 0
    ok = raw.authenticate(plain_token("alice", USERS["alice"]))
    assert (ok.error_code, ok.error_message) == (0, None)
    return raw


def test_every_refusal_and_the_bystander_keeps_being_served(
    watched: EmbeddedServer, certs: CertFiles, caplog: pytest.LogCaptureFixture
) -> None:
    server = watched
    tls = client_tls(str(certs.ca))
    bystander = _authenticated(server, certs)

    # Wrong password (PLAIN): Kafka's message, then the connection closes.
    raw = Raw(server.address_of("SASL_SSL"), tls)
    assert raw.handshake("PLAIN").error_code == 0
    failed = raw.authenticate(plain_token("alice", WRONG))
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == "Authentication failed: Invalid username or password"
    assert raw.closed_by_server()

    # Unknown user (SCRAM): refused at the client-first message, without saying why.
    raw = Raw(server.address_of("SASL_SSL"), tls)
    assert raw.handshake("SCRAM-SHA-512").error_code == 0
    failed = raw.authenticate(b"n,,n=mallory,r=abcdefghijklmnop")
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )
    assert raw.closed_by_server()

    # A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed.
    raw = Raw(server.address_of("SASL_SSL"), tls)
    refused = raw.handshake("GSSAPI")
    assert refused.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert refused.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert raw.closed_by_server()

    # A request before authentication: closed without an answer.
    raw = Raw(server.address_of("SASL_PLAINTEXT"))
    assert raw.api_versions().error_code == 0  # allowed, once
    raw.send(MetadataRequest(version=1, topics=[]), 1)
    assert raw.closed_by_server()
    # The same as the first request: the close's log line still names the client.
    raw = Raw(server.address_of("SASL_PLAINTEXT"))
    cid = b"first-request"
    raw.send_raw(struct.pack(">hhih", 3, 1, 7, len(cid)) + cid + struct.pack(">i", 0))
    assert raw.closed_by_server()

    # SaslAuthenticate without a handshake: closed.
    raw = Raw(server.address_of("SASL_PLAINTEXT"))
    with pytest.raises(Closed):
        raw.authenticate(plain_token("alice", USERS["alice"]))

    # After a v1 handshake, a request other than SaslAuthenticate: ILLEGAL_SASL_STATE, closed.
    raw = Raw(server.address_of("SASL_PLAINTEXT"))
    assert raw.handshake("PLAIN").error_code == 0
    from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

    raw.send(HeartbeatRequest(version=1, group_id="g", generation_id=1, member_id="m"), 1)
    assert raw.answer(HeartbeatResponse, 1).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert raw.closed_by_server()

    # A plaintext client on a TLS listener: the TLS layer drops it, no Kafka answer.
    raw = Raw(server.address_of("SASL_SSL"))
    with pytest.raises((Closed, TimeoutError, ConnectionError)):
        raw.api_versions()
    raw.close()

    # A client certificate from another CA on the SSL listener (client auth required).
    stranger = client_tls(str(certs.ca), str(certs.other_client_cert), str(certs.other_client_key))
    with pytest.raises((ssl.SSLError, Closed, ConnectionError)):
        raw = Raw(server.address_of("SSL"), stranger)
        raw.api_versions()  # TLS 1.3 reports the refusal at the first read
    # And none at all.
    with pytest.raises((ssl.SSLError, Closed, ConnectionError)):
        raw = Raw(server.address_of("SSL"), tls)
        raw.api_versions()

    # An undecodable SASL request on the PLAINTEXT listener (a string that is not UTF-8, which
    # the decoder's error would quote): closed, its bytes not logged.
    raw = Raw(server.address_of("PLAINTEXT"))
    mechanism = b"\xff" + WRONG.encode()
    header = struct.pack(">hhih", 17, 1, 1, 4) + b"test"
    raw.send_raw(header + struct.pack(">h", len(mechanism)) + mechanism)
    assert raw.closed_by_server()

    # The client authenticated first was served all along, and still is.
    assert bystander.metadata().brokers[0].port == int(server.address_of("SASL_SSL").split(":")[1])
    bystander.close()
    _no_secret_logged(caplog)
    closing = [r.getMessage() for r in caplog.records if "closing connection" in r.getMessage()]
    assert any("Invalid username or password" in line for line in closing), closing
    # The line names the client by the id its request gave, though it never logged in.
    assert any(
        "(client id 'first-request'): Unexpected Kafka request of type Metadata" in line
        for line in closing
    ), closing
    # Each refused TLS handshake is a log line naming the client and why (the event loop's
    # own TLS server would have dropped them without one).
    reasons = ("WRONG_VERSION_NUMBER", "CERTIFICATE_VERIFY_FAILED", "PEER_DID_NOT_RETURN")
    for _ in range(100):  # the server thread logs them as it gets to them: wait, bounded
        tls = [line for line in _messages(caplog) if "TLS handshake failed" in line]
        if all(any(reason in line for line in tls) for reason in reasons):
            break
        time.sleep(0.05)
    for reason in reasons:
        assert any(reason in line and "from 127.0.0.1:" in line for line in tls), (reason, tls)


def test_a_wrong_password_reaches_confluent_kafka_as_an_authentication_error(
    watched: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    conf = watched.client("SASL_SSL", "alice", "SCRAM-SHA-512").confluent()
    conf |= {"sasl.password": WRONG, "error_cb": errors.append}
    producer = Producer(conf)
    producer.produce("sec-topic", b"never")
    producer.flush(5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any(
        "Authentication failed during authentication due to invalid credentials" in e.str()
        for e in errors
    ), errors
    _no_secret_logged(caplog)


def test_v0_handshake_takes_raw_tokens(watched: EmbeddedServer) -> None:
    """Kafka's pre-KIP-152 exchange: after a v0 handshake the tokens travel unframed."""
    raw = Raw(watched.address_of("SASL_PLAINTEXT"))
    assert raw.handshake("PLAIN", version=0).error_code == 0
    raw.send_raw(plain_token("bob", USERS["bob"]))
    assert raw.read_frame() == b""  # PLAIN's empty server token
    assert raw.metadata().brokers[0].port == int(watched.address_of("SASL_PLAINTEXT").split(":")[1])
    raw.close()
    bad = Raw(watched.address_of("SASL_PLAINTEXT"))
    assert bad.handshake("PLAIN", version=0).error_code == 0
    bad.send_raw(plain_token("bob", WRONG))
    assert bad.closed_by_server()  # no room for an error in the raw exchange


def test_sasl_apis_after_authentication_answer_illegal_state(
    watched: EmbeddedServer, certs: CertFiles
) -> None:
    raw = _authenticated(watched, certs)
    assert raw.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
    again = raw.authenticate(plain_token("alice", USERS["alice"]))
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
    raw.close()
