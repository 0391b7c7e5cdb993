"""The hand-written ConsumerGroupHeartbeat codec agrees with the generated one (from our
schemas): requests field-equal, damaged requests refused unless the generated codec reads
them the same, answers byte-equal, at v0 and v1."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from minicoord.protocol.consumer_group_apis import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from minicoord.protocol.fast_consumer_group_heartbeat import (
    ConsumerGroupHeartbeatDecodeError,
    SteadyHeartbeat,
    decode_request,
    encode_response,
    encode_steady_response,
)
from minicoord.protocol.validate import null_violation

Req = ConsumerGroupHeartbeatRequest
Resp = ConsumerGroupHeartbeatResponse
int32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(max_size=20)
maybe = st.none() | text
owned = st.none() | st.lists(
    st.tuples(st.uuids(), st.lists(int32, max_size=5)), max_size=4
)  # fmt: skip
requests = st.tuples(
    st.integers(0, 1), text, text, int32, maybe, maybe, int32,
    st.none() | st.lists(text, max_size=4), maybe, maybe, owned,
)  # fmt: skip


def _encode(r: tuple[Any, ...]) -> bytes:
    version, group, member, epoch, instance, rack, timeout, names, regex, assignor, parts = r
    return bytes(
        Req(
            version=version,
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            instance_id=instance,
            rack_id=rack,
            rebalance_timeout_ms=timeout,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=None
            if parts is None
            else [Req.TopicPartitions(topic_id=t, partitions=ps) for t, ps in parts],
        ).encode()
    )


def _fields(r: Any, version: int) -> tuple[Any, ...]:
    return (
        r.group_id,
        r.member_id,
        r.member_epoch,
        r.instance_id,
        r.rack_id,
        r.rebalance_timeout_ms,
        None if r.subscribed_topic_names is None else list(r.subscribed_topic_names),
        r.subscribed_topic_regex if version >= 1 else None,
        r.server_assignor,
        None
        if r.topic_partitions is None
        else [(t.topic_id, list(t.partitions)) for t in r.topic_partitions],
    )


def _generated(body: bytes, version: int) -> Any | None:
    try:
        request = Req.decode(body, version=version)
    except Exception:
        return None
    return None if null_violation(request, version) is not None else request


@given(requests)
def test_requests_decode_as_the_generated_codec_reads_them(r: tuple[Any, ...]) -> None:
    version = r[0]
    body = _encode(r)
    slow = _generated(body, version)
    assert slow is not None
    assert _fields(decode_request(body, version), version) == _fields(slow, version)


@given(st.integers(0, 1), text, text, int32)
def test_steady_heartbeats_take_the_short_read_and_agree(
    version: int, group: str, member: str, epoch: int
) -> None:
    # The shape most heartbeats have: everything after the epoch null or -1.
    r = (version, group, member, epoch, None, None, -1, None, None, None, None)
    body = _encode(r)
    slow = _generated(body, version)
    assert slow is not None
    expected = _fields(slow, version)
    assert _fields(decode_request(body, version), version) == expected
    assert _fields(decode_request(memoryview(body), version), version) == expected  # type: ignore[arg-type]


@given(st.integers(0, 1), text, text, int32)
def test_a_repeated_steady_heartbeat_reads_the_same_at_its_own_version_only(
    version: int, group: str, member: str, epoch: int
) -> None:
    # The second read of the same body is the remembered one; the same bytes sent at the
    # other version are read afresh, as the generated codec reads them at that version.
    body = _encode((version, group, member, epoch, None, None, -1, None, None, None, None))
    first = decode_request(body, version)
    assert decode_request(body, version) is first
    assert _fields(first, version) == _fields(_generated(body, version), version)
    _refused_unless_read_the_same(body, 1 - version)


# Ids of any length: one length byte up to 126 bytes of UTF-8, more past it.
long_text = st.text(min_size=0, max_size=70)


@given(st.integers(0, 1), long_text, long_text, int32)
def test_steady_heartbeats_of_any_id_length_read_as_the_generated_codec_reads_them(
    version: int, group: str, member: str, epoch: int
) -> None:
    body = _encode((version, group, member, epoch, None, None, -1, None, None, None, None))
    slow = _generated(body, version)
    assert slow is not None
    fast = decode_request(body, version)
    assert _fields(fast, version) == _fields(slow, version)
    short = len(group.encode()) < 127 and len(member.encode()) < 127
    # The inline read is taken exactly when both ids have one-byte lengths.
    assert (type(fast) is SteadyHeartbeat) == short


@given(st.integers(0, 1), long_text, long_text, int32, st.integers(0, 400), st.integers(0, 255),
       st.booleans())  # fmt: skip
def test_damaged_steady_heartbeats_are_refused_unless_read_the_same(
    version: int, group: str, member: str, epoch: int, where: int, byte: int, truncate: bool
) -> None:
    # The inline read's own bounds and UTF-8 checks, at every byte of the shape it reads.
    body = _encode((version, group, member, epoch, None, None, -1, None, None, None, None))
    _refused_unless_read_the_same(_damage(body, where, byte, truncate), version)


@given(long_text, int32, int32)
def test_steady_answers_are_byte_equal(member: str, epoch: int, interval: int) -> None:
    assert encode_steady_response(member, epoch, interval) == encode_response(
        0, None, member, epoch, interval, None
    )


@given(requests, st.integers(0, 400), st.integers(0, 255), st.booleans())
def test_damaged_requests_are_refused_unless_read_the_same(
    r: tuple[Any, ...], where: int, byte: int, truncate: bool
) -> None:
    _refused_unless_read_the_same(_damage(_encode(r), where, byte, truncate), r[0])


def _damage(encoded: bytes, where: int, byte: int, truncate: bool) -> bytes:
    body = bytearray(encoded)
    where %= len(body)
    if truncate:
        del body[where:]
    else:
        body[where] = byte
    return bytes(body)


def _refused_unless_read_the_same(raw: bytes, version: int) -> None:
    slow = _generated(raw, version)
    try:
        fast = decode_request(raw, version)
    except ConsumerGroupHeartbeatDecodeError:
        fast = None
    if fast is not None:
        assert slow is not None
        assert _fields(fast, version) == _fields(slow, version)
    elif slow is not None:
        assert bytes(slow.encode()) != raw, "a well-formed request was refused"


assignments = st.none() | st.dictionaries(
    st.uuids(), st.frozensets(st.integers(0, 2**31 - 1), max_size=6), max_size=4
)


@given(st.integers(0, 1), st.integers(-1, 120), st.none() | text, st.none() | text, int32,
       int32, assignments)  # fmt: skip
def test_answers_are_byte_equal(
    version: int, error: int, message: str | None, member: str | None, epoch: int,
    interval: int, assignment: dict[uuid.UUID, frozenset[int]] | None,
) -> None:  # fmt: skip
    generated = Resp(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        member_id=member,
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=None
        if assignment is None
        else Resp.Assignment(
            topic_partitions=[
                Resp.Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(assignment.items())
                if ps
            ]
        ),
    )
    packed = encode_response(error, message, member, epoch, interval, assignment)
    assert packed == bytes(generated.encode())


def test_nulls_the_schema_forbids_are_refused() -> None:
    base = (1, "g", "m", 3, None, None, -1, ["t"], None, None, [(uuid.uuid4(), [1, 2])])
    body = _encode(base)
    # The partitions array of the one owned topic: its count byte follows the topic id.
    tid = base[10][0][0].bytes
    at = body.index(tid) + 16
    assert body[at] == 3  # two partitions, compact count
    for raw in (
        body[:at] + b"\x00" + body[at + 1 :],  # null partitions array
        b"\x00" + body[2:],  # null group id (was "g": \x02 g)
        body[:2] + b"\x00" + body[4:],  # null member id
    ):
        assert _generated(raw, 1) is None
        try:
            decode_request(raw, 1)
        except ConsumerGroupHeartbeatDecodeError:
            continue
        raise AssertionError(f"accepted {raw!r}")
    # A null topic name in the subscription.
    names_at = body.index(b"\x02t")
    with_null = body[:names_at] + b"\x00" + body[names_at + 2 :]
    assert _generated(with_null, 1) is None
    try:
        decode_request(with_null, 1)
    except ConsumerGroupHeartbeatDecodeError:
        return
    raise AssertionError("a null topic name was accepted")
