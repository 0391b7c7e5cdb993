"""Kafka RecordBatch v2 (magic 2, CRC-32C) encoding and decoding of `__consumer_offsets` records.

Batches are built and parsed with kafka-python's record code; its CRC-32C comes from the `crc32c`
C extension when installed (a dependency). A batch on disk is exactly what Kafka writes:
base offset (int64), batch length (int32), then the CRC-covered rest.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from minicoord.protocol.records import Record

# base offset, batch length, partition leader epoch, magic
_PREFIX = struct.Struct(">qiib")
PREFIX_SIZE = 12  # base offset + batch length: the bytes not counted in the length
MIN_BATCH_SIZE = DefaultRecordBatchBuilder.header_size_in_bytes()
MAGIC = 2


@dataclass(frozen=True, slots=True)
class StoredRecord:
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None


class CorruptBatch(Exception):
    pass


def _builder() -> DefaultRecordBatchBuilder:
    """An uncompressed, non-transactional batch, as the coordinator writes them."""
    return DefaultRecordBatchBuilder(
        magic=MAGIC,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 31,
    )


def encode_batch(base_offset: int, records: Sequence[Record], timestamp: int) -> bytes:
    builder = _builder()
    for delta, record in enumerate(records):
        builder.append(delta, timestamp=timestamp, key=record.key, value=record.value, headers=[])
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def encode_stored(records: Sequence[StoredRecord]) -> bytes:
    """A batch of records that keep their own offsets and timestamps (the cleaner's output).

    Offsets may have gaps, as in a compacted Kafka log; each record's offset is stored as its
    delta from the batch's base offset.
    """
    builder = _builder()
    base = records[0].offset
    for r in records:
        builder.append(r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value, headers=[])
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base)
    return bytes(buf)


def batch_extent(buf: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    """(base offset, total size) of the batch starting at pos, or None if its prefix is cut off."""
    if len(buf) - pos < PREFIX_SIZE:
        return None
    base_offset, length = struct.unpack_from(">qi", buf, pos)
    return base_offset, PREFIX_SIZE + length


def check_batch(data: bytes | memoryview) -> DefaultRecordBatch:
    """Parse one whole batch and verify it, raising CorruptBatch on any damage."""
    if len(data) < MIN_BATCH_SIZE:
        raise CorruptBatch(f"batch of {len(data)} bytes is shorter than a batch header")
    _base, length, _epoch, magic = _PREFIX.unpack_from(data, 0)
    if PREFIX_SIZE + length != len(data):
        raise CorruptBatch("batch length does not match its extent")
    if magic != MAGIC:
        raise CorruptBatch(f"magic {magic}, expected {MAGIC}")
    batch = DefaultRecordBatch(bytes(data))
    if not batch.validate_crc():
        raise CorruptBatch("CRC-32C mismatch")
    return batch


def decode_batch(data: bytes | memoryview) -> Iterator[StoredRecord]:
    batch = check_batch(data)
    try:
        for r in batch:
            yield StoredRecord(r.offset, r.timestamp, bytes(r.key), _opt_bytes(r.value))
    except Exception as exc:  # a CRC-valid batch whose records do not parse
        raise CorruptBatch(f"undecodable records: {exc!r}") from exc


def _opt_bytes(value: bytes | None) -> bytes | None:
    return None if value is None else bytes(value)
