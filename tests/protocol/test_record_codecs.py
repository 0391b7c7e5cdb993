"""The hand-packed offset commit record codecs are byte-equal to the generated ones."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from minicoord.protocol.records import (
    decode_key,
    decode_value,
    generated_offset_commit_key,
    generated_offset_commit_value,
    offset_commit_key,
    offset_commit_value,
)

# Kafka strings are int16-length-prefixed UTF-8; keep within that.
text = st.text(max_size=200)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(text, text, int32)
def test_offset_commit_key_matches_the_generated_codec(group: str, topic: str, p: int) -> None:
    fast = offset_commit_key(group, topic, p)
    assert fast == generated_offset_commit_key(group, topic, p)
    decoded = decode_key(fast)
    assert (decoded.group, decoded.topic, decoded.partition) == (group, topic, p)


@given(int64, int32, text, int64)
def test_offset_commit_value_matches_the_generated_codec(
    offset: int, epoch: int, metadata: str, ts: int
) -> None:
    fast = offset_commit_value(offset, epoch, metadata, ts)
    assert fast == generated_offset_commit_value(offset, epoch, metadata, ts)
    decoded = decode_value(decode_key(offset_commit_key("g", "t", 0)), fast)
    assert (decoded.offset, decoded.leader_epoch, decoded.metadata, decoded.commit_timestamp) == (
        offset,
        epoch,
        metadata,
        ts,
    )
