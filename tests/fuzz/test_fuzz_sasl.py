"""Hostile SaslHandshake and SaslAuthenticate frames on an unauthenticated SASL connection.

Handshakes of every version and mechanism, and the first tokens of PLAIN, SCRAM and
OAUTHBEARER (framed, after a v1 handshake, and raw, after a v0 one), mutated as
test_fuzz_wire.py mutates client traffic. Each input ends in answers or a closed connection,
fast, with no internal error; no mutated token ever authenticates anyone but the user whose
password it still carries; and afterwards a well-formed login still works.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any

import pytest
from fuzzkit import RecordingTransport, settle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from minicoord.server.broker import Broker
from minicoord.server.handlers.base import ANONYMOUS
from minicoord.server.security.connections import SaslConnection
from minicoord.server.security.oauth import UnsecuredValidator
from minicoord.server.security.sasl import SaslSettings, UserStore
from test_fuzz_wire import mutate

EXAMPLES = 1500
PASSWORD = "alice-pw"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
TOKENS = {
    "PLAIN": f"\x00alice\x00{PASSWORD}".encode(),
    "SCRAM-SHA-256": b"n,,n=alice,r=fuzzclientnonce0123",
    "SCRAM-SHA-512": b"n,,n=alice,r=fuzzclientnonce0123",
    "OAUTHBEARER": (
        b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.\x01\x01"
    ),
}


def frame(request: Any, correlation: int = 7) -> bytes:
    request.with_header(correlation_id=correlation, client_id="fuzz")
    return bytes(request.encode(header=True, framed=True))


def handshake(mechanism: str, version: int) -> bytes:
    return frame(SaslHandshakeRequest(version=version, mechanism=mechanism), 1)


def sequences() -> list[tuple[bytes, bytes]]:
    """(valid prefix, frame to mutate)."""
    out = []
    for mechanism in MECHANISMS:
        for version in (0, 1):
            out.append((b"", handshake(mechanism, version)))
        token = TOKENS[mechanism]
        for version in (0, 1, 2):
            request = SaslAuthenticateRequest(version=version, auth_bytes=token)
            out.append((handshake(mechanism, 1), frame(request)))
        out.append((handshake(mechanism, 0), struct.pack(">i", len(token)) + token))
    return out


@pytest.fixture
def sasl_settings() -> SaslSettings:
    users = UserStore()
    users.add("alice", PASSWORD)
    return SaslSettings(MECHANISMS, users, UnsecuredValidator(), 0, 64 * 1024)


def connect(broker: Broker, sasl: SaslSettings) -> tuple[SaslConnection, RecordingTransport]:
    conn = SaslConnection(broker, sasl)
    transport = RecordingTransport()
    transport.protocol = conn  # type: ignore[assignment]
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def test_mutated_sasl_frames(
    broker: Broker, sasl_settings: SaslSettings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    corpus = sequences()
    tried = {"n": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        derandomize=True,
    )
    @given(
        st.integers(0, len(corpus) - 1),
        st.integers(0, 6),
        st.integers(0, 2**16),
        st.integers(0, 2**16),
        st.binary(min_size=1, max_size=64),
        st.booleans(),
    )
    def run(index: int, kind: int, a: int, b: int, junk: bytes, random: bool) -> None:
        prefix, target = corpus[index]
        data = prefix + (junk * 4 if random else mutate(target, kind, a, b, junk))
        tried["n"] += 1
        conn, transport = connect(broker, sasl_settings)
        started = time.monotonic()
        conn.data_received(data)  # must not raise, whatever the bytes
        settle(broker)
        assert time.monotonic() - started < 2, "one input took seconds"
        assert conn.principal in (ANONYMOUS, "User:alice", "User:x")
        if conn.principal == "User:alice":
            assert PASSWORD.encode() in data or b"n=alice" in data
        transport.close()

    run()
    assert tried["n"] >= EXAMPLES // 2
    internal = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert not internal, [r.getMessage() for r in internal[:5]]
    # Still serving: a well-formed login, then a request.
    conn, transport = connect(broker, sasl_settings)
    login = SaslAuthenticateRequest(version=2, auth_bytes=TOKENS["PLAIN"])
    conn.data_received(handshake("PLAIN", 1) + frame(login, 2))
    settle(broker)
    assert conn.principal == "User:alice" and not transport.closed
    assert len(transport.responses()) == 2


def test_an_oversized_frame_before_authentication_is_refused_unread(
    broker: Broker, sasl_settings: SaslSettings
) -> None:
    """sasl.server.max.receive.size: an unauthenticated client cannot make us buffer 1 MiB."""
    conn, transport = connect(broker, sasl_settings)
    conn.data_received(struct.pack(">i", 1024 * 1024) + b"\x00" * 100)
    assert transport.closed
