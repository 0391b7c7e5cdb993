"""The hand-packed coordinator batch is byte-equal to kafka-python's builder, and reads back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from minicoord.protocol.records import Record
from minicoord.storage.batch import check_batch, encode_batch, rebuild_batch

blobs = st.none() | st.binary(max_size=300)  # past one varint byte of length
records = st.lists(st.builds(Record, blobs, blobs), min_size=1, max_size=150)


def _generated(
    base_offset: int, batch: list[Record], timestamp: int, producer: tuple[int, int] | None = None
) -> bytes:
    """kafka-python's batch; with a producer, as Kafka's coordinator writes a transactional
    one (its id and epoch, base sequence 0)."""
    producer_id, epoch = producer or (-1, -1)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=producer is not None,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=-1 if producer is None else 0,
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


@given(st.integers(0, 2**62), records, st.integers(0, 2**45), st.integers(0, 2**62),
       st.integers(0, 32767))  # fmt: skip
def test_transactional_batches_byte_equal_to_kafka_pythons_builder(
    base: int, batch: list[Record], ts: int, producer_id: int, epoch: int
) -> None:
    packed = bytes(encode_batch(base, batch, ts, producer_id, epoch))
    assert packed == _generated(base, batch, ts, (producer_id, epoch))
    parsed = check_batch(packed)
    assert parsed.is_transactional and not parsed.is_control_batch
    assert (parsed.producer_id, parsed.producer_epoch) == (producer_id, epoch)


def test_offset_deltas_past_one_table_entry() -> None:
    # Deltas from 256 on (a turn of many commits) take the general varint; keys and values
    # either side of the tables' 256-byte reach.
    batch = [Record(bytes([i % 251]) * (i % 7 + 250), b"v" * (i % 3)) for i in range(300)]
    assert bytes(encode_batch(7, batch, 1_700_000_000_000)) == _generated(
        7, batch, 1_700_000_000_000
    )


# What the cleaner reads of each record, against kafka-python's reading of the same batch:
# any compression, either timestamp type, gaps between offsets, headers, nulls.
stored = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(-(2**40), 2**40), blobs, blobs,
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)),
                       max_size=2)),
    min_size=1, max_size=60,
)  # fmt: skip


def _built(
    base: int, rows: list[tuple[int, int, bytes | None, bytes | None, list]], compression: int,
    log_append_time: int | None,
) -> bytes:  # fmt: skip
    from minicoord.storage.batch import _builder, set_base_offset, set_log_append_time

    builder = _builder(compression)
    delta = 0
    for gap, ts, key, value, headers in rows:
        builder.append(delta, timestamp=abs(ts), key=key, value=value, headers=headers)
        delta += 1 + gap
    buf = builder.build()
    set_base_offset(buf, base)
    if log_append_time is not None:
        set_log_append_time(buf, log_append_time)
    return bytes(buf)


def _as_kafka_python_reads(data: bytes) -> list[tuple[bytes | None, int, int, bool]]:
    return [
        (None if r.key is None else bytes(r.key), r.offset, r.timestamp, r.value is None)
        for r in DefaultRecordBatch(data)
    ]


@given(st.integers(0, 2**60), stored, st.sampled_from([0, 1, 3]),
       st.none() | st.integers(0, 2**45))  # fmt: skip
def test_record_keys_read_as_kafka_python_reads(
    base: int, rows: list, compression: int, log_append_time: int | None
) -> None:
    from minicoord.storage.batch import verify_batch
    from minicoord.storage.record_keys import record_keys

    data = _built(base, rows, compression, log_append_time)
    verify_batch(data)
    assert record_keys(data) == _as_kafka_python_reads(data)
    assert record_keys(memoryview(data)) == _as_kafka_python_reads(data)


@given(st.integers(0, 2**40), stored, st.integers(0, 10_000), st.integers(0, 255),
       st.booleans())  # fmt: skip
def test_damaged_records_are_refused_unless_read_the_same(
    base: int, rows: list, where: int, byte: int, truncate: bool
) -> None:
    # Damage past the header with a CRC that still matches (a producer that lied): the direct
    # walk refuses, or reads what kafka-python reads.
    from minicoord.storage.batch import (
        CRC_AT,
        HEADER_SIZE,
        PREFIX_SIZE,
        CorruptBatch,
    )
    from minicoord.storage.batch import crc32c as crc
    from minicoord.storage.record_keys import record_keys

    body = bytearray(_built(base, rows, 0, None))
    where = HEADER_SIZE + where % (len(body) - HEADER_SIZE)
    if truncate:
        del body[where:]
        body[8:12] = (len(body) - PREFIX_SIZE).to_bytes(4, "big")
    else:
        body[where] = byte
    body[CRC_AT : CRC_AT + 4] = crc(memoryview(body)[21:]).to_bytes(4, "big")
    data = bytes(body)
    try:
        fast = record_keys(data)
    except CorruptBatch:
        return
    assert fast == _as_kafka_python_reads(data)


CRC_CHILD = """
import json
import sys

from minicoord.storage import batch

first = batch.crc32c(b"123456789")  # loads the extension
seen = {name: name in sys.modules for name in ("crc32c", "importlib.metadata")}
import crc32c  # the package, as kafka-python's record code imports it

print(json.dumps({
    "first": first,
    "again": batch.crc32c(b"123456789"),
    "package": crc32c.crc32c(b"123456789"),
    "same_function": batch.crc32c is crc32c.crc32c,
    "seen": seen,
}))
"""


def test_the_crc32c_extension_loads_without_its_packages_metadata() -> None:
    # A fresh interpreter: this test process imported the `crc32c` package long ago. The
    # package's __init__ reads its own distribution metadata (importlib.metadata: 55 ms and
    # 7 MB on its own); the server needs only the C function.
    import json
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", CRC_CHILD], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["first"] == out["again"] == out["package"] == 0xE3069283  # RFC 3720's check value
    assert out["seen"] == {"crc32c": False, "importlib.metadata": False}
    # Importing the package afterwards reuses the module already loaded.
    assert out["same_function"] is True


@given(st.booleans(), st.integers(0, 2**40), st.integers(0, 32767), st.integers(0, 2**30))
def test_a_rebuilt_batch_keeps_its_identity(
    transactional: bool, producer_id: int, epoch: int, sequence: int
) -> None:
    """What the cleaner writes for a batch it took records from: the producer's fields and the
    transactional flag stay (a committed transaction's batch, cleaned, is still one, as
    Kafka's cleaner keeps it), and so do the offsets of the records kept."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 31,
    )
    for delta in range(3):
        builder.append(delta, timestamp=5, key=b"k%d" % delta, value=b"v", headers=[])
    original = DefaultRecordBatch(bytes(builder.build()))
    kept = list(DefaultRecordBatch(bytes(builder.build())))[1:]
    rebuilt = DefaultRecordBatch(rebuild_batch(original, kept))
    assert rebuilt.validate_crc()
    assert rebuilt.is_transactional is transactional
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (
        producer_id,
        epoch,
        sequence,
    )
    assert rebuilt.last_offset_delta == 2
    assert [(r.offset, r.key) for r in rebuilt] == [(1, b"k1"), (2, b"k2")]
