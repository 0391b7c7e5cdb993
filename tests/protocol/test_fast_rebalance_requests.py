"""The hand-written JoinGroup and SyncGroup request decoders agree with the generated codec:
every field equal for every version, and a damaged request refused unless the generated
decoder (with the server's null checks) reads it the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest
from minicoord.protocol.fast_rebalance_requests import (
    JoinGroupFields,
    RebalanceDecodeError,
    SyncGroupFields,
    _common_join,
    decode_join_request,
    decode_sync_request,
)
from minicoord.protocol.validate import null_violation

# Long enough that some lengths take a two-byte varint.
text = st.text(max_size=150)
int32 = st.integers(-(2**31), 2**31 - 1)
protocols = st.lists(st.tuples(text, st.binary(max_size=200)), max_size=4)
assignments = st.lists(st.tuples(text, st.binary(max_size=200)), max_size=4)


def join_body(version: int, fields: tuple[Any, ...]) -> bytes:
    group, session, rebalance, member, instance, ptype, protos, reason = fields
    return bytes(
        JoinGroupRequest(
            version=version,
            group_id=group,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            member_id=member,
            group_instance_id=instance,
            protocol_type=ptype,
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protos
            ],
            reason=reason,
        ).encode()
    )


def sync_body(version: int, fields: tuple[Any, ...]) -> bytes:
    group, generation, member, instance, ptype, pname, assigned = fields
    return bytes(
        SyncGroupRequest(
            version=version,
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
            protocol_type=ptype,
            protocol_name=pname,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in assigned
            ],
        ).encode()
    )


def join_read(r: Any, version: int) -> tuple[Any, ...]:
    """What the handler reads of a decoded JoinGroup, from either decoder."""
    return (
        r.group_id,
        r.session_timeout_ms,
        r.rebalance_timeout_ms if version >= 1 else None,
        r.member_id,
        r.group_instance_id if version >= 5 else None,
        r.protocol_type,
        (
            list(r.protocols)  # the hand-written decoder's pairs
            if isinstance(r, JoinGroupFields)
            else [(p.name, bytes(p.metadata)) for p in r.protocols]
        ),
        r.reason if version >= 8 else None,
    )


def sync_read(r: Any, version: int) -> tuple[Any, ...]:
    return (
        r.group_id,
        r.generation_id,
        r.member_id,
        r.group_instance_id if version >= 3 else None,
        r.protocol_type if version >= 5 else None,
        r.protocol_name if version >= 5 else None,
        (
            r.assignments  # the hand-written decoder's pairs
            if isinstance(r, SyncGroupFields)
            else [(a.member_id, bytes(a.assignment)) for a in r.assignments]
        ),
    )


def generated(request_type: Any, body: bytes, version: int) -> Any | None:
    """The generated decoder plus the server's null checks; None where they refuse."""
    try:
        request = request_type.decode(body, version=version)
    except Exception:
        return None
    return None if null_violation(request, version) is not None else request


join_fields = st.tuples(
    text, int32, int32, text, st.none() | text, text, protocols, st.none() | text
)
sync_fields = st.tuples(
    text, int32, text, st.none() | text, st.none() | text, st.none() | text, assignments
)


@given(st.integers(0, 9), join_fields)
def test_join_requests_read_as_the_generated_codec_reads_them(
    version: int, fields: tuple[Any, ...]
) -> None:
    body = join_body(version, fields)
    slow = generated(JoinGroupRequest, body, version)
    assert slow is not None
    assert join_read(decode_join_request(body, version), version) == join_read(slow, version)


@given(st.integers(0, 5), sync_fields)
def test_sync_requests_read_as_the_generated_codec_reads_them(
    version: int, fields: tuple[Any, ...]
) -> None:
    body = sync_body(version, fields)
    slow = generated(SyncGroupRequest, body, version)
    assert slow is not None
    assert sync_read(decode_sync_request(body, version), version) == sync_read(slow, version)


def damaged(body: bytes, where: int, byte: int, truncate: bool) -> bytes:
    out = bytearray(body)
    where %= len(out)
    if truncate:
        del out[where:]
    else:
        out[where] = byte
    return bytes(out)


damage = (st.integers(0, 400), st.integers(0, 255), st.booleans())


def refused_or_read_the_same(
    raw: bytes,
    version: int,
    request_type: Any,
    decode: Callable[[bytes, int], Any],
    read: Callable[[Any, int], tuple[Any, ...]],
) -> None:
    slow = generated(request_type, raw, version)
    try:
        fast = decode(raw, version)
    except RebalanceDecodeError:
        # The generated decoder reads past the end of a truncated field without complaint;
        # the fast one refuses those, but never a well-formed request.
        assert slow is None or bytes(slow.encode()) != raw, "a well-formed request was refused"
        return
    assert slow is not None
    assert read(fast, version) == read(slow, version)


@given(st.integers(0, 9), join_fields, *damage)
def test_damaged_join_requests_are_refused_or_read_the_same(
    version: int, fields: tuple[Any, ...], where: int, byte: int, truncate: bool
) -> None:
    raw = damaged(join_body(version, fields), where, byte, truncate)
    refused_or_read_the_same(raw, version, JoinGroupRequest, decode_join_request, join_read)


@given(st.integers(0, 5), sync_fields, *damage)
def test_damaged_sync_requests_are_refused_or_read_the_same(
    version: int, fields: tuple[Any, ...], where: int, byte: int, truncate: bool
) -> None:
    raw = damaged(sync_body(version, fields), where, byte, truncate)
    refused_or_read_the_same(raw, version, SyncGroupRequest, decode_sync_request, sync_read)


@given(st.integers(0, 9), join_fields)
def test_a_first_join_read_again_reads_as_its_own_version_does(
    version: int, fields: tuple[Any, ...]
) -> None:
    # First joins (no member id) are kept by version and body: the same bytes sent again, at
    # this version or read as any other, must read as the generated codec reads them there.
    body = join_body(version, (*fields[:3], "", *fields[4:]))
    for _ in range(2):
        for other in range(10):
            refused_or_read_the_same(body, other, JoinGroupRequest, decode_join_request, join_read)


@given(st.integers(0, 9), join_fields, text, *damage)
def test_a_rejoin_read_through_its_first_join_reads_as_the_generated_codec_reads_it(
    version: int, fields: tuple[Any, ...], member_id: str, where: int, byte: int, truncate: bool
) -> None:
    # A rejoin is read as the first join it repeats (kept by its bytes) with its own member
    # id: whole, it must read as the generated codec reads it, and damaged, be refused or
    # read the same; nor may it borrow a first join of another version.
    first = join_body(version, (*fields[:3], "", *fields[4:]))
    for other in range(10):
        refused_or_read_the_same(first, other, JoinGroupRequest, decode_join_request, join_read)
    rejoin = join_body(version, (*fields[:3], member_id, *fields[4:]))
    for other in range(10):
        refused_or_read_the_same(rejoin, other, JoinGroupRequest, decode_join_request, join_read)
    raw = damaged(rejoin, where, byte, truncate)
    refused_or_read_the_same(raw, version, JoinGroupRequest, decode_join_request, join_read)


def test_first_joins_kept_for_their_rejoins_stay_few_and_small() -> None:
    # What is kept to read a crowd's rejoins is bounded in entries and in each entry's size,
    # whoever sends first joins: a big subscription is read every time instead.
    from minicoord.protocol import fast_rebalance_requests as reader

    big = join_body(5, ("g", 30_000, 60_000, "", None, "consumer", [("range", b"x" * 5000)], None))
    reader.decode_join_request(big, 5)
    assert (5, big) not in reader._FIRST_JOINS
    for i in range(3 * reader._FIRST_JOINS_MAX):
        small = join_body(5, (f"g{i}", 30_000, 60_000, "", None, "consumer", [("r", b"m")], None))
        reader.decode_join_request(small, 5)
        assert len(reader._FIRST_JOINS) <= reader._FIRST_JOINS_MAX
    assert all(len(body) <= reader._FIRST_JOIN_MAX_BYTES for _, body in reader._FIRST_JOINS)


def test_a_thousand_member_leader_sync_reads_the_same() -> None:
    assigned = [(f"consumer-{i}-{'0' * 36}", b"\x00\x03" + b"a" * 60) for i in range(1000)]
    for version in (3, 5):
        body = sync_body(version, ("g", 7, assigned[0][0], None, "consumer", "range", assigned))
        slow = generated(SyncGroupRequest, body, version)
        assert sync_read(decode_sync_request(body, version), version) == sync_read(slow, version)


# -- the shape nearly every JoinGroup has (read by its own short path) -------------------

short = st.text(max_size=30)  # under 127 bytes of UTF-8
short_join = st.tuples(
    short, int32, int32, short, st.none(), short,
    st.lists(st.tuples(short, st.binary(max_size=300)), max_size=3), st.none() | short,
)  # fmt: skip


@given(st.integers(0, 9), short_join)
def test_common_join_requests_read_as_the_generated_codec_reads_them(
    version: int, fields: tuple[Any, ...]
) -> None:
    body = join_body(version, fields)
    slow = generated(JoinGroupRequest, body, version)
    assert slow is not None
    assert _common_join(body, version) is not None  # the short path read it
    assert join_read(decode_join_request(body, version), version) == join_read(slow, version)


@given(st.integers(0, 9), short_join, *damage)
def test_damaged_common_join_requests_are_refused_or_read_the_same(
    version: int, fields: tuple[Any, ...], where: int, byte: int, truncate: bool
) -> None:
    raw = damaged(join_body(version, fields), where, byte, truncate)
    refused_or_read_the_same(raw, version, JoinGroupRequest, decode_join_request, join_read)
