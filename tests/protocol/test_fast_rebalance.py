"""The hand-written JoinGroup, SyncGroup and LeaveGroup response encoders are byte-equal to
kafka-python's generated ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_rebalance import (
    encode_join_response,
    encode_leave_response,
    encode_sync_response,
)

Generated = JoinGroupResponse.JoinGroupResponseMember
# Long enough that some lengths take a two-byte varint or a wide length.
text = st.text(max_size=150)
int32 = st.integers(-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class Member:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


members = st.lists(st.builds(Member, text, st.none() | text, st.binary(max_size=200)), max_size=5)


def generated_join(
    version: int,
    error: int,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip: bool,
    member_id: str,
    listed: list[Member],
) -> bytes:
    """The answer kafka-python's generated encoder writes for these fields."""
    return bytes(
        JoinGroupResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error,
            generation_id=generation,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            leader=leader,
            skip_assignment=skip,
            member_id=member_id,
            members=[Generated(m.member_id, m.group_instance_id, m.metadata) for m in listed],
        ).encode(version=version)
    )


@given(
    st.integers(0, 9),
    st.sampled_from(list(ErrorCode)),
    int32,
    st.none() | text,
    st.none() | text,
    text,
    st.booleans(),
    text,
    members,
)
def test_join_encoding_is_byte_equal(
    version: int,
    error: ErrorCode,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip: bool,
    member_id: str,
    listed: list[Member],
) -> None:
    if version < 7 and protocol_name is None:
        protocol_name = ""  # not nullable there: the handler answers ""
    fields = (version, error, generation, protocol_type, protocol_name, leader, skip)
    fast = encode_join_response(*fields, member_id, listed)
    assert fast == generated_join(*fields, member_id, listed)
    # And what a client reads back is what was meant.
    decoded = JoinGroupResponse.decode(memoryview(fast), version=version)
    assert (decoded.error_code, decoded.generation_id, decoded.member_id) == (
        error,
        generation,
        member_id,
    )
    assert [(m.member_id, bytes(m.metadata)) for m in decoded.members] == [
        (m.member_id, m.metadata) for m in listed
    ]


@given(
    st.integers(0, 9),
    st.sampled_from(list(ErrorCode)),
    int32,
    st.none() | text,
    text,
    text,
    st.booleans(),
    st.lists(text, min_size=2, max_size=4),
)
def test_answers_sharing_all_but_the_member_id_are_each_byte_equal(
    version: int,
    error: ErrorCode,
    generation: int,
    protocol_type: str | None,
    protocol_name: str,
    leader: str,
    skip: bool,
    member_ids: list[str],
) -> None:
    # A generation's followers (and a crowd's MEMBER_ID_REQUIRED answers) share the part
    # before the member id, packed once: each answer must still be its own.
    fields = (version, error, generation, protocol_type, protocol_name, leader, skip)
    for member_id in member_ids:
        fast = encode_join_response(*fields, member_id, [])
        assert fast == generated_join(*fields, member_id, [])


def test_a_thousand_member_leader_answer_is_byte_equal() -> None:
    listed = [
        Member(f"consumer-{i}-{'0' * 36}", None, b"\x00\x03" + b"m" * 40) for i in range(1000)
    ]
    for version in (5, 9):
        leader = listed[0].member_id
        fields = (version, 0, 7, "consumer", "range", leader, False, leader, listed)
        assert encode_join_response(*fields) == generated_join(*fields)


def test_a_null_protocol_name_is_refused_where_it_is_not_nullable() -> None:
    with pytest.raises(ValueError):
        encode_join_response(6, 0, 1, None, None, "", False, "m", [])


@given(
    st.integers(0, 5),
    st.sampled_from(list(ErrorCode)),
    st.none() | text,
    st.none() | text,
    st.binary(max_size=300),
)
def test_sync_encoding_is_byte_equal(
    version: int,
    error: ErrorCode,
    protocol_type: str | None,
    protocol_name: str | None,
    assignment: bytes,
) -> None:
    expected = SyncGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    ).encode(version=version)
    fast = encode_sync_response(version, error, protocol_type, protocol_name, assignment)
    assert fast == bytes(expected)


leaving = st.lists(st.tuples(text, st.none() | text, st.sampled_from(list(ErrorCode))), max_size=5)


@given(st.integers(0, 5), st.sampled_from(list(ErrorCode)), leaving)
def test_leave_encoding_is_byte_equal(
    version: int, error: ErrorCode, members: list[tuple[str, str | None, ErrorCode]]
) -> None:
    expected = LeaveGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        members=[
            LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
            for m, i, e in members
        ],
    ).encode(version=version)
    fast = encode_leave_response(version, error, members if version >= 3 else ())
    assert fast == bytes(expected)
    if version >= 3:
        decoded = LeaveGroupResponse.decode(memoryview(fast), version=version)
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in decoded.members] == [
            (m, i, e) for m, i, e in members
        ]
