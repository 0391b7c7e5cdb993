"""The hand-written OffsetCommit response encoder is byte-equal to the generated one."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_offset_commit import encode_response

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
