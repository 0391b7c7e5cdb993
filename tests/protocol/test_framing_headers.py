"""Sans-IO framing and header tests: no sockets."""

from __future__ import annotations

import struct

import kafka.errors
import pytest
from hypothesis import given
from hypothesis import strategies as st
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.framing import (
    FrameReader,
    FrameTooLarge,
    NegativeFrameSize,
    frame,
    whole_frame,
)
from minicoord.protocol.headers import (
    MalformedHeader,
    parse_request_header,
    response_header,
    skip_tagged_fields,
)


def test_frames_split_across_reads_are_reassembled() -> None:
    reader = FrameReader(1000)
    data = frame(b"hello") + frame(b"") + frame(b"world!")
    got: list[bytes] = []
    for i in range(len(data)):
        got += reader.feed(data[i : i + 1])
    assert got == [b"hello", b"", b"world!"]
    assert reader.buffered == 0


@given(st.lists(st.binary(max_size=50), max_size=10), st.integers(min_value=1, max_value=17))
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], chunk: int) -> None:
    reader = FrameReader(100)
    data = b"".join(frame(p) for p in payloads)
    got: list[bytes] = []
    for i in range(0, len(data), chunk):
        got += reader.feed(data[i : i + chunk])
    assert got == payloads


@given(st.lists(st.binary(max_size=50), max_size=10), st.integers(min_value=1, max_value=60))
def test_whole_reads_yield_the_same_frames_as_the_general_path(
    payloads: list[bytes], chunk: int
) -> None:
    # A read that is exactly one frame, with nothing buffered, is handed out by `whole_frame`
    # (as a connection does); any other read is buffered for `next_frame`. Mixed, they must
    # cut the stream as the general path alone does.
    reader = FrameReader(100)
    data = b"".join(frame(p) for p in payloads)
    got: list[bytes] = []
    reads = [frame(p) for p in payloads[:2]] + [
        data[i : i + chunk]
        for i in range(sum(len(frame(p)) for p in payloads[:2]), len(data), chunk)
    ]
    for read in reads:
        whole = None if reader.buffered else whole_frame(read, 100)
        if whole is not None:
            got.append(whole)
        else:
            reader.append(read)
        while (f := reader.next_frame()) is not None:
            got.append(bytes(f))
    assert got == payloads
    assert reader.buffered == 0


def test_whole_leaves_oversized_and_negative_frames_to_the_general_path() -> None:
    for bad, error in (
        (struct.pack(">i", 1025), FrameTooLarge),
        (struct.pack(">i", -5) + b"x", NegativeFrameSize),
    ):
        reader = FrameReader(1024)
        assert whole_frame(bad + b"\0" * 3, 1024) is None
        reader.append(bad + b"\0" * 3)
        with pytest.raises(error):
            reader.next_frame()


def test_oversized_frame_is_refused_from_its_length_alone() -> None:
    reader = FrameReader(1024)
    with pytest.raises(FrameTooLarge) as info:
        reader.feed(struct.pack(">i", 1025))  # no body bytes were sent at all
    assert info.value.size == 1025


def test_negative_frame_length_is_refused() -> None:
    with pytest.raises(NegativeFrameSize):
        FrameReader(1024).feed(struct.pack(">i", -5) + b"x")


def test_request_header_v1_and_v2() -> None:
    body = struct.pack(">hhih", 11, 5, 77, 3) + b"abc" + b"rest"
    header, pos = parse_request_header(body)
    assert (header.api_key, header.api_version, header.correlation_id) == (11, 5, 77)
    assert header.client_id == "abc"
    assert body[pos:] == b"rest"
    # v2: a tagged-field section follows: two fields, skipped whole.
    tagged = bytes([2, 0, 1, 0xAA, 5, 2, 0xBB, 0xCC])
    header, pos = parse_request_header(struct.pack(">hhih", 12, 4, 1, -1) + tagged + b"body")
    assert header.client_id is None
    assert skip_tagged_fields(tagged + b"body", 0) == len(tagged)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x0b\x00",  # shorter than the fixed part
        struct.pack(">hhih", 11, 5, 1, 10) + b"abc",  # client id runs past the end
        struct.pack(">hhih", 11, 5, 1, -7),  # impossible length
        struct.pack(">hhih", 11, 5, 1, 2) + b"\xff\xfe",  # not UTF-8
    ],
)
def test_malformed_headers_raise(data: bytes) -> None:
    with pytest.raises(MalformedHeader):
        parse_request_header(data)


def test_truncated_tagged_fields_raise() -> None:
    with pytest.raises(MalformedHeader):
        skip_tagged_fields(bytes([1, 0, 9, 1]), 0)


def test_response_headers() -> None:
    assert response_header(7, flexible=False) == struct.pack(">i", 7)
    assert response_header(7, flexible=True) == struct.pack(">i", 7) + b"\x00"


# Kafka's names where kafka-python keeps an older one for the same code.
RENAMED = {
    "UNKNOWN_SERVER_ERROR": "UNKNOWN",
    "NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",
    "MESSAGE_TOO_LARGE": "MESSAGE_SIZE_TOO_LARGE",
    "INVALID_REPLICA_ASSIGNMENT": "INVALID_REPLICATION_ASSIGNMENT",
}
# Codes newer than kafka-python 3.0.12's table, with their numbers in Kafka's Errors.java.
NEWER = {"INVALID_REGULAR_EXPRESSION": 128}


def test_error_codes_match_kafka_python() -> None:
    classes = [kafka.errors.BrokerResponseError]
    for cls in classes:  # every subclass, however deep
        classes.extend(cls.__subclasses__())
    by_code = {cls.errno: cls for cls in classes if isinstance(cls.errno, int)}
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        if code.name in NEWER:
            assert code.value == NEWER[code.name]
            continue
        assert code.value in by_code, code
        expected = by_code[code.value].message
        name = RENAMED.get(code.name, code.name)
        assert expected.replace("_EXCEPTION", "") == name.replace("_EXCEPTION", ""), code
