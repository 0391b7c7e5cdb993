"""The hand-written OffsetCommit codec agrees with the generated one: responses byte-equal,
requests field-equal, damaged requests refused exactly when the generated codec (with the
server's null checks) refuses them."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_offset_commit import (
    OffsetCommitDecodeError,
    decode_request,
    encode_response,
)
from minicoord.protocol.validate import null_violation

Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = Topic.OffsetCommitResponsePartition

partitions = st.lists(
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.sampled_from([int(e) for e in ErrorCode])),
    max_size=5,
)
topics = st.lists(st.tuples(st.text(max_size=30), st.uuids() | st.none(), partitions), max_size=5)


@given(st.integers(2, 10), topics)
def test_byte_equal_to_the_generated_encoder(version: int, data: list) -> None:
    generated = OffsetCommitResponse(
        version=version,
        throttle_time_ms=0,
        topics=[
            Topic(
                name=name,
                topic_id=topic_id or uuid.UUID(int=0),
                partitions=[Partition(partition_index=i, error_code=e) for i, e in parts],
            )
            for name, topic_id, parts in data
        ],
    )
    assert encode_response(version, data) == bytes(generated.encode())


def test_counts_past_one_varint_byte() -> None:
    many = [(i, 0) for i in range(300)]
    data = [("t" * 200, None, many)]
    for version in (7, 9):
        generated = OffsetCommitResponse(
            version=version,
            throttle_time_ms=0,
            topics=[
                Topic(
                    name="t" * 200,
                    topic_id=uuid.UUID(int=0),
                    partitions=[Partition(partition_index=i, error_code=e) for i, e in many],
                )
            ],
        )
        assert encode_response(version, data) == bytes(generated.encode())


# -- the request decoder -----------------------------------------------------------------

Req = OffsetCommitRequest
ReqTopic = Req.OffsetCommitRequestTopic
ReqPartition = ReqTopic.OffsetCommitRequestPartition
int32 = st.integers(-(2**31), 2**31 - 1)
req_partitions = st.lists(
    st.tuples(int32, st.integers(-(2**63), 2**63 - 1), int32, st.none() | st.text(max_size=20)),
    max_size=4,
)
req_topics = st.lists(st.tuples(st.text(max_size=20), st.uuids(), req_partitions), max_size=4)


def _encoded(  # type: ignore[no-untyped-def]
    version: int, group: str, gen: int, member: str, instance: str | None, data, retention: int = -1
) -> bytes:
    return bytes(
        Req(
            version=version,
            group_id=group,
            generation_id_or_member_epoch=gen,
            member_id=member,
            group_instance_id=instance,
            retention_time_ms=retention,
            topics=[
                ReqTopic(
                    name=name,
                    topic_id=tid,
                    partitions=[
                        ReqPartition(
                            partition_index=i,
                            committed_offset=o,
                            committed_leader_epoch=e,
                            committed_metadata=m,
                        )
                        for i, o, e, m in parts
                    ],
                )
                for name, tid, parts in data
            ],
        ).encode()
    )


def _fields(request: object, version: int) -> tuple:  # type: ignore[type-arg]
    """What the handler reads of a decoded request, from either decoder."""
    r: Any = request
    return (
        r.group_id,
        r.generation_id_or_member_epoch,
        r.member_id,
        r.group_instance_id if version >= 7 else None,
        r.retention_time_ms if version <= 4 else -1,
        [
            (
                t.name if version < 10 else None,
                t.topic_id if version >= 10 else None,
                [
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 6 else -1,
                        p.committed_metadata,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )


def _generated(body: bytes, version: int) -> object | None:
    """The generated decoder plus the server's null checks; None where they refuse."""
    try:
        request = Req.decode(body, version=version)
    except Exception:
        return None
    return None if null_violation(request, version) is not None else request


@given(
    st.integers(2, 10), st.text(max_size=20), int32, st.text(max_size=20),
    st.none() | st.text(max_size=10), req_topics, st.integers(-(2**63), 2**63 - 1),
)  # fmt: skip
def test_request_decoding_matches_the_generated_codec(  # type: ignore[no-untyped-def]
    version, group, gen, member, instance, data, retention
) -> None:
    body = _encoded(version, group, gen, member, instance, data, retention)
    slow = _generated(body, version)
    assert slow is not None
    assert _fields(decode_request(body, version), version) == _fields(slow, version)


@given(st.integers(2, 10), req_topics, st.integers(0, 200), st.integers(0, 255), st.booleans())
def test_damaged_requests_are_refused_unless_the_generated_codec_reads_them_the_same(  # type: ignore[no-untyped-def]
    version, data, where, byte, truncate
) -> None:
    body = bytearray(_encoded(version, "group", 3, "member", None, data))
    where %= len(body)
    if truncate:
        del body[where:]
    else:
        body[where] = byte
    raw = bytes(body)
    slow = _generated(raw, version)
    try:
        fast = decode_request(raw, version)
    except OffsetCommitDecodeError:
        fast = None
    if fast is not None:
        # Whatever the fast decoder accepts, the generated one reads the same.
        assert slow is not None
        assert _fields(fast, version) == _fields(slow, version)
    elif slow is not None:
        # The generated decoder reads past the end of a truncated string without complaint;
        # the fast one may refuse those, but never a well-formed request.
        assert bytes(slow.encode()) != raw, "a well-formed request was refused"  # type: ignore[attr-defined]


# -- the one-partition shape nearly every commit has (read by its own short path) ----------

one_partition = st.tuples(st.text(max_size=20), int32, st.integers(-(2**63), 2**63 - 1), int32)


@given(st.integers(8, 9), st.text(max_size=30), int32, st.text(max_size=60), one_partition)
def test_one_partition_commits_read_as_the_generated_codec_reads_them(  # type: ignore[no-untyped-def]
    version, group, gen, member, partition
) -> None:
    name, index, offset, epoch = partition
    body = _encoded(version, group, gen, member, None, [(name, None, [(index, offset, epoch, "")])])
    slow = _generated(body, version)
    assert slow is not None
    assert _fields(decode_request(body, version), version) == _fields(slow, version)


@given(
    st.integers(8, 9), st.text(max_size=30), int32, st.text(max_size=60), one_partition,
    st.integers(-(2**63), 2**63 - 1), int32,
)  # fmt: skip
def test_a_members_next_commit_reads_as_the_generated_codec_reads_it(  # type: ignore[no-untyped-def]
    version, group, gen, member, partition, offset, epoch
) -> None:
    # The first commit teaches the decoder the member's shape; the next, the same but for the
    # committed offset and leader epoch, is read from it.
    name, index, first_offset, first_epoch = partition
    for committed, leader_epoch in ((first_offset, first_epoch), (offset, epoch)):
        data = [(name, None, [(index, committed, leader_epoch, "")])]
        body = _encoded(version, group, gen, member, None, data)
        slow = _generated(body, version)
        assert slow is not None
        assert _fields(decode_request(body, version), version) == _fields(slow, version)


@given(
    st.integers(8, 9), st.text(max_size=30), st.text(max_size=60), one_partition,
    st.integers(0, 200), st.integers(0, 255), st.booleans(),
)  # fmt: skip
def test_damaged_one_partition_commits_are_refused_or_read_the_same(  # type: ignore[no-untyped-def]
    version, group, member, partition, where, byte, truncate
) -> None:
    name, index, offset, epoch = partition
    data = [(name, None, [(index, offset, epoch, "")])]
    body = bytearray(_encoded(version, group, 7, member, None, data))
    decode_request(bytes(body), version)  # the member's shape, known before the damage
    where %= len(body)
    if truncate:
        del body[where:]
    else:
        body[where] = byte
    raw = bytes(body)
    slow = _generated(raw, version)
    try:
        fast = decode_request(raw, version)
    except OffsetCommitDecodeError:
        return
    assert slow is not None
    assert _fields(fast, version) == _fields(slow, version)
