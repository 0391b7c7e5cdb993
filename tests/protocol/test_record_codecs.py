"""The hand-packed offset commit and group metadata record codecs are byte-equal to the
generated ones."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from minicoord.protocol.records import (
    decode_key,
    decode_value,
    generated_group_metadata_value,
    generated_offset_commit_key,
    generated_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
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


members = st.lists(
    st.tuples(
        text, st.none() | text, text, text, int32, int32, st.binary(max_size=100), st.binary()
    ),
    max_size=4,
)


@given(text, int32, st.none() | text, st.none() | text, int64, members)
def test_group_metadata_value_matches_the_generated_codec(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    ts: int,
    listed: list,
) -> None:
    fast = group_metadata_value(protocol_type, generation, protocol, leader, ts, listed)
    assert fast == generated_group_metadata_value(
        protocol_type, generation, protocol, leader, ts, listed
    )
    decoded = decode_value(decode_key(group_metadata_key("g")), fast)
    assert (decoded.generation, decoded.protocol, decoded.leader) == (generation, protocol, leader)
    assert [(m.member_id, bytes(m.assignment)) for m in decoded.members] == [
        (m[0], m[7]) for m in listed
    ]
