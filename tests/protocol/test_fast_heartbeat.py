"""The hand-written Heartbeat codec agrees with kafka-python's generated one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_heartbeat import (
    HeartbeatDecodeError,
    decode_request,
    encode_response,
)

text = st.text(max_size=100)
versions = st.integers(0, 4)


@given(versions, text, st.integers(-(2**31), 2**31 - 1), text, st.none() | text)
def test_decoding_matches_the_generated_codec(
    version: int, group: str, generation: int, member: str, instance: str | None
) -> None:
    request = HeartbeatRequest(
        version=version,
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
    )
    body = bytes(request.encode())
    fast = decode_request(body, version)
    slow = HeartbeatRequest.decode(body, version=version)
    assert (fast.group_id, fast.generation_id, fast.member_id) == (
        slow.group_id,
        slow.generation_id,
        slow.member_id,
    )
    assert fast.group_instance_id == (slow.group_instance_id if version >= 3 else None)


@given(versions, st.sampled_from(list(ErrorCode)))
def test_encoding_is_byte_equal(version: int, error: ErrorCode) -> None:
    expected = HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error).encode()
    assert encode_response(version, error) == bytes(expected)


@given(versions, st.binary(max_size=40))
def test_garbage_is_refused_or_decoded_like_the_generated_codec(version: int, raw: bytes) -> None:
    try:
        fast = decode_request(raw, version)
    except (HeartbeatDecodeError, ValueError):
        return
    slow = HeartbeatRequest.decode(raw, version=version)
    assert (fast.group_id, fast.generation_id, fast.member_id) == (
        slow.group_id,
        slow.generation_id,
        slow.member_id,
    )


@pytest.mark.parametrize("version", [0, 3, 4])
def test_null_group_id_is_refused(version: int) -> None:
    body = (b"\xff\xff" if version < 4 else b"\x00") + b"\x00\x00\x00\x01" + b"\x00\x01m"
    with pytest.raises(HeartbeatDecodeError):
        decode_request(body, version)


short = st.text(max_size=40)


def _v4(group: str, generation: int, member: str) -> bytes:
    """A v4 heartbeat without an instance id: the shape the short path reads."""
    request = HeartbeatRequest(
        version=4, group_id=group, generation_id=generation, member_id=member,
        group_instance_id=None,
    )  # fmt: skip
    return bytes(request.encode())


@given(short, st.integers(-(2**31), 2**31 - 1), short)
def test_a_repeated_v4_heartbeat_is_the_one_read_before(
    group: str, generation: int, member: str
) -> None:
    body = _v4(group, generation, member)
    first = decode_request(body, 4)
    assert decode_request(body, 4) is first
    assert (first.group_id, first.generation_id, first.member_id, first.group_instance_id) == (
        group, generation, member, None,
    )  # fmt: skip


@given(short, st.integers(-(2**31), 2**31 - 1), short, st.integers(0, 120), st.integers(0, 255))
def test_v4_heartbeats_damaged_anywhere_are_refused_or_read_the_same(
    group: str, generation: int, member: str, where: int, byte: int
) -> None:
    # v4 heartbeats without an instance id take a short path of their own; whatever it
    # accepts, the generated codec must read the same.
    intact = _v4(group, generation, member)
    fast = decode_request(intact, 4)
    assert (fast.group_id, fast.generation_id, fast.member_id, fast.group_instance_id) == (
        group, generation, member, None,
    )  # fmt: skip
    damaged = bytearray(intact)
    damaged[where % len(damaged)] = byte
    for raw in (bytes(damaged), intact[: where % len(intact)]):
        try:
            fast = decode_request(raw, 4)
        except (HeartbeatDecodeError, ValueError):
            continue
        slow = HeartbeatRequest.decode(raw, version=4)
        assert (fast.group_id, fast.generation_id, fast.member_id, fast.group_instance_id) == (
            slow.group_id, slow.generation_id, slow.member_id, slow.group_instance_id,
        )  # fmt: skip
