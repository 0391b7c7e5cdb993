"""The hand-packed coordinator batch is byte-equal to kafka-python's builder, and reads back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from minicoord.protocol.records import Record
from minicoord.storage.batch import check_batch, encode_batch

blobs = st.none() | st.binary(max_size=300)  # past one varint byte of length
records = st.lists(st.builds(Record, blobs, blobs), min_size=1, max_size=150)


def _generated(base_offset: int, batch: list[Record], timestamp: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 31,
    )
    for delta, r in enumerate(batch):
        builder.append(delta, timestamp=timestamp, key=r.key, value=r.value, headers=[])
    buf = builder.build()
    buf[0:8] = base_offset.to_bytes(8, "big", signed=True)
    return bytes(buf)


@given(st.integers(0, 2**62), records, st.integers(0, 2**45))
def test_byte_equal_to_kafka_pythons_builder(base: int, batch: list[Record], ts: int) -> None:
    packed = bytes(encode_batch(base, batch, ts))
    assert packed == _generated(base, batch, ts)
    parsed = check_batch(packed)  # CRC and extent verified
    assert isinstance(parsed, DefaultRecordBatch)
    assert [(r.key, r.value) for r in parsed] == [(r.key, r.value) for r in batch]
