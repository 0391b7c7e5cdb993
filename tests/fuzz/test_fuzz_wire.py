"""Hostile input never hurts the server or other clients.

Inputs: random bytes; and captures of real client traffic (aiokafka, confluent-kafka with
the classic and the consumer group protocol and as a transactional producer, kafka-python,
recorded through a proxy) plus a
default request of every API at every served version, mutated: bit flips, truncation, garbage
appended after a valid request, negative and huge length prefixes, wrong API keys and
versions, absurd array counts written into the body.

Each input must end in either a response carrying the request's correlation id or that
connection closed with a log line; never an exception out of the server, an internal-error
abort (a handler bug), a stuck call, or a large allocation; and afterwards the same broker still
answers a well-formed request and still has a commit made before the storm.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import tracemalloc
from typing import Any

import pytest
from fuzz_capture import capture_client_frames
from fuzzkit import connect, settle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest
from minicoord.server.broker import Broker
from minicoord.server.handlers import HandlerRegistry

EXAMPLES = 2000
# Counted across the session and reported by the last test (the closing note quotes it).
TRIED = {"inputs": 0}


def default_frames() -> list[bytes]:
    frames = []
    for handler in HandlerRegistry.default():
        for version in range(handler.min_version, handler.max_version + 1):
            request = handler.spec.request(version=version)
            request.with_header(correlation_id=7, client_id="fuzz")
            frames.append(bytes(request.encode(header=True, framed=True)))
    return frames


@pytest.fixture(scope="module")
def corpus() -> list[bytes]:
    captured = asyncio.run(capture_client_frames())
    assert len(captured) >= 20, "the stock clients sent too little to fuzz from"
    apis = {struct.unpack_from(">h", f, 4)[0] for f in captured}
    assert {10, 11, 14, 12, 8, 9} <= apis  # coordinator traffic was captured
    assert {68, 69} <= apis  # with KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe
    assert {0, 1, 2, 22} <= apis  # and the data path: Produce, Fetch, ListOffsets, producer ids
    assert {24, 25, 26, 28} <= apis  # and a transactional producer's requests
    return captured + default_frames()


def mutate(frame: bytes, kind: int, a: int, b: int, junk: bytes) -> bytes:
    data = bytearray(frame)
    n = len(data)
    if kind == 0:  # flip bits in the body
        for i in range(1 + b % 4):
            pos = 4 + (a + i * 7919) % max(1, n - 4)
            data[pos % n] ^= 1 << (b % 8)
    elif kind == 1:  # truncate (the prefix still claims the full length)
        del data[4 + a % max(1, n - 4) :]
    elif kind == 2:  # garbage after a valid request, counted in the length
        data += junk
        struct.pack_into(">i", data, 0, len(data) - 4)
    elif kind == 3:  # negative or huge length prefix
        struct.pack_into(">i", data, 0, [-1, -(2**31), 2**31 - 1, 10**9, n * 1000][a % 5])
    elif kind == 4:  # wrong API key or version
        struct.pack_into(">hh", data, 4, (a % 100) - 2, (b % 40) - 3)
    elif kind == 5:  # an absurd array count (or string length) written into the body
        if n > 16:
            pos = 12 + a % (n - 15)
            struct.pack_into(">i", data, pos, [2**31 - 1, -2, 0x10000000][b % 3])
    else:  # replace a stretch of the body with random bytes
        pos = 4 + a % max(1, n - 4)
        data[pos : pos + len(junk)] = junk
        struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def correlation_of(frame: bytes) -> int | None:
    return struct.unpack_from(">i", frame, 8)[0] if len(frame) >= 12 else None


def feed(broker: Broker, data: bytes) -> tuple[Any, Any]:
    conn, transport = connect(broker)
    started = time.monotonic()
    conn.data_received(data)  # must not raise, whatever the bytes
    settle(broker)
    assert time.monotonic() - started < 2, "one input took seconds: a stuck loop"
    return conn, transport


def check_outcome(transport: Any, conn: Any, frame: bytes) -> None:
    if transport.closed:
        return
    responses = transport.responses()
    if not responses:
        # Either the frame is not yet whole and waits for more bytes (the idle timeout,
        # connections.max.idle.ms, closes it if nothing comes), or its answer is parked
        # (a long poll, a JoinGroup waiting for the group), or it was a Produce with acks=0.
        produce = len(frame) >= 6 and struct.unpack_from(">h", frame, 4)[0] == 0
        assert conn.buffered > 0 or conn._queue or produce or len(frame) == 0
        return
    assert struct.unpack_from(">i", responses[0])[0] == correlation_of(frame)


def test_mutated_client_traffic(
    broker: Broker, corpus: list[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "minicoord.connection")
    baseline = _commit(broker)
    tracemalloc.start()

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
    )
    def run(index: int, kind: int, a: int, b: int, junk: bytes) -> None:
        frame = mutate(corpus[index], kind, a, b, junk)
        TRIED["inputs"] += 1
        conn, transport = feed(broker, frame)
        check_outcome(transport, conn, frame)
        transport.close()

    try:
        run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # No input made the server allocate in proportion to a length it was merely told.
    assert peak < 64 * 1024 * 1024, peak
    internal = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert not internal, [r.getMessage() for r in internal[:5]]
    assert _still_serving(broker, baseline)


def _end_offsets(broker: Broker) -> dict[tuple[str, int], int]:
    return {key: state.log.next_offset for key, state in broker.data.partitions.items()}


def test_mutated_produce_requests_append_only_what_they_acknowledge(
    broker: Broker, corpus: list[bytes]
) -> None:
    """A Produce that is refused (any partition answered with an error, or the request not
    understood) appends nothing for it; partitions it did not name never change."""
    produces = [f for f in corpus if struct.unpack_from(">h", f, 4)[0] == 0]
    assert len(produces) >= 5, "too few Produce requests captured"

    @settings(
        max_examples=600,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        derandomize=True,
    )
    @given(
        st.integers(0, len(produces) - 1),
        st.sampled_from([0, 1, 2, 5, 6]),
        st.integers(0, 2**16),
        st.integers(0, 2**16),
        st.binary(min_size=1, max_size=64),
    )
    def run(index: int, kind: int, a: int, b: int, junk: bytes) -> None:
        frame = mutate(produces[index], kind, a, b, junk)
        TRIED["inputs"] += 1
        before = _end_offsets(broker)
        conn, transport = feed(broker, frame)
        check_outcome(transport, conn, frame)
        grown = {k: v - before.get(k, 0) for k, v in _end_offsets(broker).items()}
        grown = {k: n for k, n in grown.items() if n}
        responses = transport.responses()
        if not responses:
            # Closed (not understood) or acks=0: nothing may be appended unless it was a
            # well-formed acks=0 request that the server took.
            acks_zero = not transport.closed
            assert not grown or acks_zero, (grown, transport.closed)
            transport.close()
            return
        version = struct.unpack_from(">h", frame, 6)[0]
        # A mutated API key makes it another API's request (answered as that API: the SASL
        # APIs, for one, answer where an unknown key used to close), which appends nothing.
        other_api = struct.unpack_from(">h", frame, 4)[0] != 0
        if other_api or not 3 <= version <= 13:  # another API, or a version outside ours
            assert not grown, grown
            transport.close()
            return
        accepted = _accepted_partitions(responses[0], version)
        for key in grown:
            assert key in accepted, f"{key} grew by {grown[key]} but was not acknowledged"
        transport.close()

    run()
    assert _still_serving(broker, None)


def _accepted_partitions(body: bytes, version: int) -> set[tuple[str, int]]:
    from kafka.protocol.producer import ProduceResponse

    # Flexible versions (v9+) carry an empty tag section after the correlation id.
    start = 5 if version >= 9 else 4
    response = ProduceResponse.decode(memoryview(body)[start:], version=version)
    return {
        (t.name, p.index)
        for t in response.responses
        for p in t.partition_responses
        if p.error_code == 0
    }


def test_mutated_consumer_group_requests(
    broker: Broker, corpus: list[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    """librdkafka's ConsumerGroupHeartbeat and ConsumerGroupDescribe frames get a share of
    mutations of their own: the corpus draw above gives them only a handful."""
    caplog.set_level(logging.WARNING, "minicoord.connection")
    frames = [f for f in corpus if struct.unpack_from(">h", f, 4)[0] in (68, 69)]
    assert len(frames) >= 10, "too few consumer-protocol requests captured"

    @settings(
        max_examples=500,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        derandomize=True,
    )
    @given(
        st.integers(0, len(frames) - 1),
        st.integers(0, 6),
        st.integers(0, 2**16),
        st.integers(0, 2**16),
        st.binary(min_size=1, max_size=64),
    )
    def run(index: int, kind: int, a: int, b: int, junk: bytes) -> None:
        frame = mutate(frames[index], kind, a, b, junk)
        TRIED["inputs"] += 1
        conn, transport = feed(broker, frame)
        check_outcome(transport, conn, frame)
        transport.close()

    run()
    internal = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert not internal, [r.getMessage() for r in internal[:5]]
    assert _still_serving(broker, None)


def test_random_bytes(broker: Broker) -> None:
    @settings(
        max_examples=400,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
        derandomize=True,
    )
    @given(st.binary(max_size=300))
    def run(raw: bytes) -> None:
        TRIED["inputs"] += 1
        conn, transport = feed(broker, raw)
        check_outcome(transport, conn, raw)
        transport.close()

    run()
    assert _still_serving(broker, None)


def _commit(broker: Broker) -> int:
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        version=8,
        group_id="survivor",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            Topic(
                name="topic6",
                partitions=[
                    Topic.OffsetCommitRequestPartition(
                        partition_index=3,
                        committed_offset=4242,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    request.with_header(correlation_id=1, client_id="survivor")
    _, transport = feed(broker, bytes(request.encode(header=True, framed=True)))
    assert transport.responses(), "the commit was not answered"
    return 4242


def _still_serving(broker: Broker, offset: int | None) -> bool:
    api = ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1")
    api.with_header(correlation_id=5, client_id="after")
    _, transport = feed(broker, bytes(api.encode(header=True, framed=True)))
    assert struct.unpack_from(">ih", transport.responses()[0]) == (5, 0)
    if offset is None:
        return True
    fetch = OffsetFetchRequest(
        version=7,
        group_id="survivor",
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="topic6", partition_indexes=[3])],
        require_stable=False,
    )
    fetch.with_header(correlation_id=6, client_id="after")
    _, transport = feed(broker, bytes(fetch.encode(header=True, framed=True)))
    (body,) = transport.responses()
    return _decode_offset_fetch(body) == offset


def _decode_offset_fetch(body: bytes) -> int:
    from kafka.protocol.consumer import OffsetFetchResponse

    # Header v1 (flexible): correlation id and an empty tag section.
    response = OffsetFetchResponse.decode(memoryview(body)[5:], version=7)
    return response.topics[0].partitions[0].committed_offset


def test_report_inputs_tried() -> None:
    # Runs after the fuzzers in this module (pytest keeps file order).
    print(f"\nfuzz inputs tried: {TRIED['inputs']}")
    assert TRIED["inputs"] >= 3000
