"""ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69) on the wire, byte for
byte: librdkafka's requests (group.protocol=consumer) and minicoord's answers, recorded by
the proxy of fuzz_capture.py, decode with minicoord's codec (protocol/consumer_group_apis.py)
and encode back to exactly the bytes that crossed the socket, header and length prefix
included. What they say is checked against Kafka's rules too: a member id the client made
up and the coordinator echoes, the server's heartbeat interval, assignments by topic id,
leaving at epochs -1 and -2, and an error answer that carries only the error and its message.

The same session's frames are part of the fuzz corpus (test_fuzz_wire.py), so the fuzzer
mutates these messages too.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest
from fuzz_capture import capture_consumer_protocol_exchanges
from minicoord.protocol.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from minicoord.protocol.errors import ErrorCode

HEARTBEAT_INTERVAL_MS = 500  # the server's default group.consumer.heartbeat.interval.ms
CODECS = {
    68: (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    69: (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
}


@pytest.fixture(scope="module")
def captured() -> tuple[list[tuple[bytes, bytes]], uuid.UUID]:
    return asyncio.run(capture_consumer_protocol_exchanges())


def api_of(frame: bytes) -> tuple[int, int]:
    key, version = struct.unpack_from(">hh", frame, 4)
    return key, version


def decoded(
    captured: tuple[list[tuple[bytes, bytes]], uuid.UUID], key: int
) -> list[tuple[Any, Any]]:
    """Each captured exchange of API `key`, decoded, after checking that both of its frames
    encode back to the very same bytes."""
    request_codec, response_codec = CODECS[key]
    out = []
    for request, response in captured[0]:
        api, version = api_of(request)
        if api != key:
            continue
        req = request_codec.decode(request, version=version, header=True, framed=True)
        assert bytes(req.encode(header=True, framed=True)) == request, (version, req)
        resp = response_codec.decode(response, version=version, header=True, framed=True)
        assert bytes(resp.encode(header=True, framed=True)) == response, (version, resp)
        assert resp.header.correlation_id == req.header.correlation_id
        out.append((req, resp))
    return out


def test_consumer_group_heartbeats_round_trip_byte_for_byte(
    captured: tuple[list[tuple[bytes, bytes]], uuid.UUID],
) -> None:
    exchanges = decoded(captured, 68)
    topic_id = captured[1]
    assert len(exchanges) >= 10, len(exchanges)
    # librdkafka 2.x asks for v1 (the coordinator advertises 0-1): client-made member ids.
    assert {req.API_VERSION for req, _ in exchanges} == {1}

    for req, resp in exchanges:
        if resp.error_code != ErrorCode.NONE:
            continue
        assert resp.member_id == req.member_id and req.member_id
        for tp in resp.assignment.topic_partitions if resp.assignment else []:
            assert tp.topic_id == topic_id and set(tp.partitions) <= set(range(6))
        if req.member_epoch >= 0:
            assert resp.heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
            assert resp.member_epoch > 0

    joins = [(q, r) for q, r in exchanges if q.member_epoch == 0 and r.error_code == 0]
    assert len(joins) >= 3
    for req, resp in joins:
        # A join is a full request, and its answer always carries an assignment (maybe empty).
        assert req.rebalance_timeout_ms > 0 and req.topic_partitions == []
        assert resp.assignment is not None
    static = [q for q, _ in joins if q.instance_id is not None]
    assert [(q.instance_id, q.rack_id) for q in static] == [("capture-static", "rack-a")]
    assert any(q.server_assignor == "range" for q, _ in joins)
    by_regex = [(q, r) for q, r in joins if q.subscribed_topic_regex]
    assert by_regex, "no member subscribed by regular expression"
    for req, resp in by_regex:
        assert "topic" in req.subscribed_topic_regex
        assert [tp.topic_id for tp in resp.assignment.topic_partitions] == [topic_id]

    # An acknowledgement lists the partitions the member owns; an answer that changes
    # nothing carries no assignment (null), as Kafka's does.
    acks = [(q, r) for q, r in exchanges if q.member_epoch > 0 and q.topic_partitions]
    assert acks and any(r.assignment is None for _, r in acks)

    leaves = {q.member_epoch: r for q, r in exchanges if q.member_epoch < 0}
    assert set(leaves) == {-1, -2}, leaves
    for epoch, resp in leaves.items():
        assert (resp.error_code, resp.member_epoch, resp.assignment) == (0, epoch, None)

    (refused,) = [r for _, r in exchanges if r.error_code != ErrorCode.NONE]
    assert refused.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert refused.error_message == (
        "ServerAssignor no-such is not supported. Supported assignors: uniform, range."
    )
    # Kafka's error answers carry nothing else.
    assert (refused.member_id, refused.member_epoch, refused.heartbeat_interval_ms) == (None, 0, 0)
    assert refused.assignment is None


def test_consumer_group_describe_round_trips_byte_for_byte(
    captured: tuple[list[tuple[bytes, bytes]], uuid.UUID],
) -> None:
    exchanges = decoded(captured, 69)
    topic_id = captured[1]
    groups = {g.group_id: g for _, resp in exchanges for g in resp.groups}
    (found,) = [g for g in groups.values() if g.error_code == ErrorCode.NONE]
    (missing,) = [g for g in groups.values() if g.error_code != ErrorCode.NONE]
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert missing.error_message == f"Group {missing.group_id} not found."
    assert (found.group_state, found.assignor_name) == ("Stable", "range")
    assert found.assignment_epoch == found.group_epoch
    assert found.authorized_operations == -(2**31)  # not asked for
    assert len(found.members) == 2
    owned: list[int] = []
    for member in found.members:
        assert member.client_host == "/127.0.0.1"
        assert member.subscribed_topic_names == ["topic6"]
        assert member.member_epoch == found.group_epoch
        (tp,) = member.assignment.topic_partitions
        assert (tp.topic_id, tp.topic_name) == (topic_id, "topic6")
        (target,) = member.target_assignment.topic_partitions
        assert (target.topic_id, target.partitions) == (tp.topic_id, tp.partitions)
        owned += tp.partitions
    assert sorted(owned) == list(range(6))
