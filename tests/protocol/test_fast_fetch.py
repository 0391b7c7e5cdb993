"""The hand-written Fetch response encoder is byte-equal to the generated one."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_fetch import FetchedPartition, encode_response

TopicResponse = FetchResponse.FetchableTopicResponse
Partition = TopicResponse.PartitionData
Aborted = Partition.AbortedTransaction

offsets = st.integers(-1, 2**63 - 1)
partitions = st.lists(
    st.builds(
        FetchedPartition,
        index=st.integers(-(2**31), 2**31 - 1),
        error=st.sampled_from([int(e) for e in ErrorCode]),
        high_watermark=offsets,
        last_stable_offset=offsets,
        log_start_offset=offsets,
        aborted=st.none() | st.lists(st.tuples(offsets, offsets), max_size=3),
        # Around the size at which record sets become buffers of their own.
        records=st.binary(max_size=20) | st.binary(min_size=250, max_size=300),
    ),
    max_size=4,
)
topics = st.lists(st.tuples(st.text(max_size=20), st.uuids(), partitions), max_size=4)


def generated(version: int, error: int, session: int, data: list) -> bytes:
    response = FetchResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        session_id=session,
        responses=[
            TopicResponse(
                topic=name,
                topic_id=topic_id,
                partitions=[
                    Partition(
                        partition_index=p.index,
                        error_code=p.error,
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None
                        if p.aborted is None
                        else [Aborted(producer_id=a, first_offset=b) for a, b in p.aborted],
                        preferred_read_replica=-1,
                        records=p.records,
                    )
                    for p in parts
                ],
            )
            for name, topic_id, parts in data
        ],
    )
    return bytes(response.encode())


@settings(max_examples=300)
@given(st.integers(4, 18), st.sampled_from([0, 70]), st.integers(0, 2**31 - 1), topics)
def test_byte_equal_to_the_generated_encoder(
    version: int, error: int, session: int, data: list
) -> None:
    parts = encode_response(version, error, session, data)
    assert b"".join(parts) == generated(version, error, session, data)


def test_large_record_sets_are_their_own_buffers() -> None:
    records = bytes(range(256)) * 40
    p = FetchedPartition(0, 0, 5, 5, 0, None, records)
    for version in (4, 11, 12, 16):
        parts = encode_response(version, 0, 0, [("t", uuid.UUID(int=1), [p])])
        assert any(part is records for part in parts)  # handed on, not copied
        assert b"".join(parts) == generated(version, 0, 0, [("t", uuid.UUID(int=1), [p])])


def test_counts_past_one_varint_byte() -> None:
    many = [FetchedPartition(i, 0, i, i, 0, None, b"") for i in range(200)]
    data = [("t" * 200, uuid.UUID(int=7), many)]
    for version in (11, 12, 13):
        assert b"".join(encode_response(version, 0, 0, data)) == generated(version, 0, 0, data)
