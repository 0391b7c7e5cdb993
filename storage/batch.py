"""Kafka RecordBatch v2 (magic 2, CRC-32C): the unit every log stores, coordinator or producer.

A batch on disk is exactly what Kafka writes: base offset (int64), batch length (int32), then
partition leader epoch, magic, CRC and the CRC-covered rest (attributes to the end). The
broker owns the two fields outside the CRC (base offset, leader epoch), so assigning offsets
to a producer's batch is a rewrite of its first eight bytes; nothing else needs re-encoding.

Records inside a batch are built and parsed with kafka-python's record code (its CRC-32C comes
from the `crc32c` C extension, a dependency; compressed batches need the codec packages
python-snappy, lz4 and zstandard, also dependencies), except on the two hottest paths: the
coordinator's own batches are packed here (`encode_batch`), and the cleaner reads records'
keys and offsets in record_keys.py; tests hold both to kafka-python's results.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from minicoord.protocol.headers import write_uvarint
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.protocol.records import Record

if TYPE_CHECKING:
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

# kafka-python's record code and the `crc32c` extension are imported with the first batch
# built, checked or read, not at start (see load_crc32c for the extension).

# The whole v2 batch header: base offset, length, leader epoch, magic, CRC, attributes,
# last offset delta, first timestamp, max timestamp, producer id, producer epoch, base
# sequence, record count.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
PREFIX_SIZE = 12  # base offset + batch length: the bytes not counted in the length
MIN_BATCH_SIZE = HEADER_SIZE
MAGIC = 2
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LEADER_EPOCH_AT = 12
MAX_TIMESTAMP_AT = 35
LAST_OFFSET_DELTA_AT = 23

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_PREFIX = struct.Struct(">qi")
# The header split around its CRC: what precedes it, and the CRC-covered rest.
_BEFORE_CRC = struct.Struct(">qiibI")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


def load_crc32c() -> Callable[[bytes | bytearray | memoryview], int]:
    """The `crc32c` package's C function, its extension module loaded by itself.

    Importing the package runs its `__init__`, which reads the package's own distribution
    metadata for a version string (importlib.metadata, and with it email, zipfile, csv and
    more) and imports its command line: 55 ms and 7.4 MB of RSS in a fresh interpreter,
    against 6 ms and 0.9 MB for the extension alone, paid by every server at its first
    batch (a topic created at start, the first group or commit). The module is registered
    under its own name, so the package's `__init__`, if anything runs it later, takes this
    one (lazy_kafka.defer_codec_packages keeps kafka-python's record code from running it).
    A layout other than the known one falls back to the package."""
    import sys

    module = sys.modules.get("crc32c._crc32c")
    if module is None:
        import importlib.machinery
        import importlib.util

        try:
            package = importlib.util.find_spec("crc32c")
            spec = importlib.machinery.PathFinder.find_spec(
                "crc32c._crc32c",
                package.submodule_search_locations if package is not None else None,
            )
            if spec is None or spec.loader is None:
                raise ImportError("crc32c._crc32c not found beside the package")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (ImportError, AttributeError, OSError):
            import crc32c as package

            # Asked for first, `__version__` runs the package's `__init__` if lazy_kafka
            # deferred it, which replaces the stand-in it set for `crc32c` with the function.
            package.__version__  # noqa: B018
            return package.crc32c  # type: ignore[no-any-return]
        sys.modules["crc32c._crc32c"] = module
    return module.crc32c  # type: ignore[no-any-return]


def _first_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The first CRC-32C asked for: load the extension, and put its function in this
    module's `crc32c`, so that every later call goes to it directly."""
    global crc32c
    extension = load_crc32c()
    crc32c = extension
    return extension(data)


crc32c: Callable[[bytes | bytearray | memoryview], int] = _first_crc32c


@dataclass(frozen=True, slots=True)
class StoredRecord:
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None


class CorruptBatch(Exception):
    pass


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class BatchInfo:
    """The header fields of one batch that the log keeps track of."""

    base_offset: int
    size: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_LOG_APPEND)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)


def batch_info(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchInfo:
    """Header fields of the batch at pos (the caller checked HEADER_SIZE bytes are there)."""
    (
        base,
        length,
        _epoch,
        _magic,
        _crc,
        attributes,
        last_delta,
        first_ts,
        max_ts,
        pid,
        pepoch,
        base_seq,
        count,
    ) = HEADER.unpack_from(buf, pos)
    return BatchInfo(
        base, PREFIX_SIZE + length, attributes, last_delta, first_ts, max_ts, pid, pepoch,
        base_seq, count,
    )  # fmt: skip


def crc_valid(buf: bytes | bytearray | memoryview) -> bool:
    """Whether the stored CRC-32C matches attributes..end of this one whole batch."""
    (stored,) = _U32.unpack_from(buf, CRC_AT)
    return crc32c(memoryview(buf)[ATTRIBUTES_AT:]) == stored


def set_base_offset(buf: bytearray, offset: int) -> None:
    _I64.pack_into(buf, 0, offset)


def set_leader_epoch(buf: bytearray, epoch: int) -> None:
    _I32.pack_into(buf, LEADER_EPOCH_AT, epoch)


def set_max_timestamp(buf: bytearray, timestamp: int) -> None:
    """Write a batch's max timestamp (as Kafka does: the one its records say) and its CRC,
    as a CreateTime batch."""
    (attributes,) = _I16.unpack_from(buf, ATTRIBUTES_AT)
    _I16.pack_into(buf, ATTRIBUTES_AT, attributes & ~TIMESTAMP_TYPE_LOG_APPEND)
    _I64.pack_into(buf, MAX_TIMESTAMP_AT, timestamp)
    _U32.pack_into(buf, CRC_AT, crc32c(memoryview(buf)[ATTRIBUTES_AT:]))


# kafka.codec's encoders by compression type (snappy in xerial's framing, as Kafka's Java
# producer and broker write it).
_ENCODERS = {1: "gzip_encode", 2: "snappy_encode", 3: "lz4_encode", 4: "zstd_encode"}


def recompress(buf: bytearray, records: bytes, compression: int) -> bytearray:
    """The batch `buf` with its `records` (uncompressed) stored under `compression` (0: none),
    as Kafka's broker rewrites a batch to a topic's compression.type: same header, records
    and offsets, new attributes, length and CRC."""
    if compression:
        import kafka.codec

        records = getattr(kafka.codec, _ENCODERS[compression])(records)
    out = bytearray(buf[:HEADER_SIZE])
    out += records
    (attributes,) = _I16.unpack_from(out, ATTRIBUTES_AT)
    _I16.pack_into(out, ATTRIBUTES_AT, (attributes & ~COMPRESSION_MASK) | compression)
    _I32.pack_into(out, 8, len(out) - PREFIX_SIZE)
    _U32.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return out


def set_log_append_time(buf: bytearray, timestamp: int) -> None:
    """Stamp a batch with LogAppendTime: max timestamp and the timestamp-type bit, new CRC."""
    (attributes,) = _I16.unpack_from(buf, ATTRIBUTES_AT)
    _I16.pack_into(buf, ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_LOG_APPEND)
    _I64.pack_into(buf, MAX_TIMESTAMP_AT, timestamp)
    _U32.pack_into(buf, CRC_AT, crc32c(memoryview(buf)[ATTRIBUTES_AT:]))


def _builder(
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
) -> DefaultRecordBatchBuilder:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    return DefaultRecordBatchBuilder(
        magic=MAGIC,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 31,
    )


def _varint(n: int) -> bytes:
    """A zig-zag varint, as record fields are written."""
    n = (n << 1) ^ (n >> 63)
    # Small values (most deltas and lengths) without a second call.
    return _SMALL_VARINTS[n] if n < 0x80 else write_uvarint(n)


_SMALL_VARINTS = [bytes([i]) for i in range(0x80)]
# attributes 0, timestamp delta 0: the first two bytes of every coordinator record.
_RECORD_HEAD = b"\x00\x00"
_NULL = _varint(-1)
_NO_HEADERS = b"\x00"
_SMALL_ZIGZAG = [_varint(i) for i in range(256)]
# A record's attributes, timestamp delta and offset delta, by offset delta.
_RECORD_HEADS = [_RECORD_HEAD + _SMALL_ZIGZAG[i] for i in range(256)]


def encode_batch(
    base_offset: int,
    records: Sequence[Record],
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
) -> bytearray:
    """An uncompressed batch, as the coordinator writes them: non-transactional, or with a
    producer id a transactional one (TxnOffsetCommit's), stamped as Kafka's coordinator
    stamps it (the producer's id and epoch, base sequence 0).

    Packed by hand into one list of parts joined once per batch (commits are the hottest
    write); tests/storage/test_batch.py proves it byte-equal to kafka-python's builder.
    """
    parts: list[bytes] = [b""]  # the header goes first, once the CRC is known
    extend = parts.extend
    # Lengths and deltas under 256 (nearly all) from the tables, without a call each.
    small = _SMALL_ZIGZAG
    heads = _RECORD_HEADS
    for delta, record in enumerate(records):
        key, value = record.key, record.value
        if key is not None and value is not None and delta < 256:
            key_size = len(key)
            value_size = len(value)
            if key_size < 256 and value_size < 256:
                head = heads[delta]
                key_len = small[key_size]
                value_len = small[value_size]
                size = len(head) + len(key_len) + key_size + len(value_len) + value_size + 1
                extend(
                    (
                        small[size] if size < 256 else _varint(size),
                        head,
                        key_len,
                        key,
                        value_len,
                        value,
                        _NO_HEADERS,
                    )
                )
                continue
        body = b"".join(
            (
                _RECORD_HEAD,
                _varint(delta),
                _NULL if key is None else _varint(len(key)) + key,
                _NULL if value is None else _varint(len(value)) + value,
                _NO_HEADERS,
            )
        )
        extend((_varint(len(body)), body))
    count = len(records)
    if producer_id == NO_PRODUCER_ID:
        attributes, sequence = 0, NO_SEQUENCE
    else:
        attributes, sequence = TRANSACTIONAL, 0
    tail = _AFTER_CRC.pack(
        attributes, count - 1, timestamp, timestamp, producer_id, producer_epoch, sequence, count
    )
    parts[0] = tail
    covered = b"".join(parts)
    size = HEADER_SIZE + len(covered) - len(tail)
    buf = bytearray(_BEFORE_CRC.pack(base_offset, size - PREFIX_SIZE, 0, MAGIC, crc32c(covered)))
    buf += covered
    return buf


def encode_stored(records: Sequence[StoredRecord]) -> bytes:
    """A batch of records that keep their own offsets and timestamps.

    Offsets may have gaps, as in a compacted Kafka log; each record's offset is stored as its
    delta from the batch's base offset.
    """
    builder = _builder()
    base = records[0].offset
    for r in records:
        builder.append(r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value, headers=[])
    buf = builder.build()
    set_base_offset(buf, base)
    return bytes(buf)


def rebuild_batch(original: DefaultRecordBatch, kept: Sequence[Any]) -> bytes:
    """A batch holding `kept` (records of `original`) with the original's batch identity.

    What the cleaner writes for a batch it removed records from: the same base offset,
    compression, timestamp type, transactional flag, producer id, epoch and base sequence, and
    (as Kafka's cleaner does) the original last offset delta, so the batch still spans the
    sequence numbers its producer sent and a restarted broker rebuilds the same producer and
    transaction state.
    """
    builder = _builder(
        original.compression_type,
        original.producer_id,
        original.producer_epoch,
        original.base_sequence,
        original.is_transactional,
    )
    base = original.base_offset
    for r in kept:
        builder.append(
            r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers
        )
    buf = builder.build()
    set_base_offset(buf, base)
    set_leader_epoch(buf, original.leader_epoch)
    _I32.pack_into(buf, LAST_OFFSET_DELTA_AT, original.last_offset_delta)
    if original.timestamp_type:
        set_log_append_time(buf, original.max_timestamp)
    else:
        _U32.pack_into(buf, CRC_AT, crc32c(memoryview(buf)[ATTRIBUTES_AT:]))
    return bytes(buf)


def batch_extent(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int] | None:
    """(base offset, total size) of the batch starting at pos, or None if its prefix is cut off."""
    if len(buf) - pos < PREFIX_SIZE:
        return None
    base_offset, length = _PREFIX.unpack_from(buf, pos)
    return base_offset, PREFIX_SIZE + length


def verify_batch(data: bytes | bytearray | memoryview) -> None:
    """Check one whole batch's extent, magic and CRC, raising CorruptBatch on any damage."""
    if len(data) < MIN_BATCH_SIZE:
        raise CorruptBatch(f"batch of {len(data)} bytes is shorter than a batch header")
    _base, length = _PREFIX.unpack_from(data, 0)
    if PREFIX_SIZE + length != len(data):
        raise CorruptBatch("batch length does not match its extent")
    magic = data[MAGIC_AT]
    if magic != MAGIC:
        raise CorruptBatch(f"magic {magic}, expected {MAGIC}")
    if not crc_valid(data):
        raise CorruptBatch("CRC-32C mismatch")


def check_batch(data: bytes | bytearray | memoryview) -> DefaultRecordBatch:
    """Parse one whole batch and verify it, raising CorruptBatch on any damage."""
    verify_batch(data)
    return parse_batch(data)


def parse_batch(data: bytes | bytearray | memoryview) -> DefaultRecordBatch:
    """kafka-python's reader over one whole batch that verify_batch already passed."""
    from kafka.record.default_records import DefaultRecordBatch

    return DefaultRecordBatch(data)


def read_zigzag(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint (int32 or int64) at pos, and where the next field starts;
    IndexError past the end or past ten bytes (a record that does not parse, to callers)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise IndexError("a varint longer than ten bytes")


def decode_batch(data: bytes | bytearray | memoryview) -> Iterator[StoredRecord]:
    batch = check_batch(data)
    try:
        for r in batch:
            yield StoredRecord(r.offset, r.timestamp, opt_bytes(r.key), opt_bytes(r.value))
    except Exception as exc:  # a CRC-valid batch whose records do not parse
        raise CorruptBatch(f"undecodable records: {exc!r}") from exc


def iter_batches(data: bytes | bytearray | memoryview) -> Iterator[memoryview]:
    """The whole batches of a buffer, in order; a cut-off tail is left out."""
    view = memoryview(data)
    pos = 0
    end = len(view)
    while pos < end:
        extent = batch_extent(view, pos)
        if extent is None or extent[1] < MIN_BATCH_SIZE or pos + extent[1] > end:
            return
        yield view[pos : pos + extent[1]]
        pos += extent[1]


def opt_bytes(value: Any) -> Any:
    return None if value is None else bytes(value)
