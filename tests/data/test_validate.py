"""Produced batches are checked as Kafka's LogValidator checks them, with Kafka's error codes,
and nothing of a refused batch reaches the log."""

from __future__ import annotations

import os
import struct
from dataclasses import replace

import pytest
from crc32c import crc32c
from datakit import NOW, Plane, batch, records
from kafka.record.default_records import DefaultRecordBatch
from minicoord.protocol.errors import ErrorCode
from minicoord.server.data.validate import InvalidBatch, Limits, check_produced
from minicoord.storage.batch import ATTRIBUTES_AT, CRC_AT, batch_info

LIMITS = Limits(
    max_message_bytes=1_048_588,
    segment_bytes=1 << 30,
    log_append_time=False,
    compacted=False,
    before_max_ms=2**63 - 1,
    after_max_ms=3_600_000,
)


def recrc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, CRC_AT, crc32c(memoryview(data)[ATTRIBUTES_AT:]))
    return bytes(data)


def refused(data: bytes | None, limits: Limits = LIMITS, version: int = 9) -> InvalidBatch:
    with pytest.raises(InvalidBatch) as info:
        check_produced(data, limits, NOW, version)
    return info.value


def test_a_good_batch_is_accepted_as_sent() -> None:
    data = batch(records(3))
    out, info = check_produced(data, LIMITS, NOW, 9)
    assert bytes(out) == data
    assert (info.records, info.last_offset_delta, info.max_timestamp) == (3, 2, NOW)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_walked_and_stored_as_sent(codec: int) -> None:
    data = batch(records(50), compression=codec)
    out, info = check_produced(data, LIMITS, NOW, 9)
    assert bytes(out) == data  # not recompressed
    assert info.records == 50
    assert [r.value for r in DefaultRecordBatch(bytes(out))][-1] == b"value-m49"


def test_no_record_set_is_invalid_record() -> None:
    assert refused(None).error is ErrorCode.INVALID_RECORD
    assert refused(b"").error is ErrorCode.INVALID_RECORD


def test_an_old_message_format_is_invalid_record() -> None:
    data = bytearray(batch())
    data[16] = 1  # magic 1
    error = refused(bytes(data))
    assert error.error is ErrorCode.INVALID_RECORD and "magic 2" in error.message


def test_a_nonsense_length_field_is_corrupt_message() -> None:
    data = bytearray(batch())
    struct.pack_into(">i", data, 8, 3)
    assert refused(bytes(data)).error is ErrorCode.CORRUPT_MESSAGE


def test_two_batches_in_one_partition_are_invalid_record() -> None:
    error = refused(batch() + batch())
    assert error.error is ErrorCode.INVALID_RECORD and "exactly one record batch" in error.message


def test_a_cut_off_trailing_batch_is_ignored_as_kafka_does() -> None:
    second = batch()
    out, _ = check_produced(batch() + second[:20], LIMITS, NOW, 9)
    assert bytes(out) == batch()


def test_zstd_needs_produce_v7() -> None:
    data = batch(records(20), compression=4)
    assert data[22] & 0x07 == 4
    assert refused(data, version=6).error is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    check_produced(data, LIMITS, NOW, 7)


def test_a_base_offset_set_by_the_producer_is_invalid_record() -> None:
    data = bytearray(batch())
    struct.pack_into(">q", data, 0, 5)  # outside the CRC, so only this check sees it
    assert refused(bytes(data)).error is ErrorCode.INVALID_RECORD


def test_a_batch_over_max_message_bytes_is_message_too_large() -> None:
    data = batch([(b"k", b"x" * 2000)])
    small = replace(LIMITS, **{"max_message_bytes": 1000})
    assert refused(data, small).error is ErrorCode.MESSAGE_TOO_LARGE


def test_a_batch_over_segment_bytes_is_record_list_too_large() -> None:
    data = batch([(b"k", b"x" * 2000)])
    small = replace(LIMITS, **{"segment_bytes": 1000})
    assert refused(data, small).error is ErrorCode.RECORD_LIST_TOO_LARGE


def test_a_flipped_bit_is_corrupt_message() -> None:
    data = bytearray(batch(records(3)))
    data[-2] ^= 0x40
    assert refused(bytes(data)).error is ErrorCode.CORRUPT_MESSAGE


def test_a_count_that_disagrees_with_the_offsets_is_invalid_record() -> None:
    data = bytearray(batch(records(3)))
    struct.pack_into(">i", data, 57, 4)  # the record count
    error = refused(recrc(data))
    assert error.error is ErrorCode.INVALID_RECORD and "Inconsistent" in error.message


def test_fewer_records_than_declared_is_invalid_record() -> None:
    data = bytearray(batch(records(3)))
    struct.pack_into(">i", data, 57, 4)
    struct.pack_into(">i", data, 23, 3)  # last offset delta agrees with the count: 4 records
    error = refused(recrc(data))
    assert error.error is ErrorCode.INVALID_RECORD and "premature EOF" in error.message


def test_control_batches_from_clients_are_invalid_record() -> None:
    data = bytearray(batch())
    data[22] |= 0x20
    assert refused(recrc(data)).error is ErrorCode.INVALID_RECORD


def test_a_producer_id_without_a_sequence_is_invalid_record() -> None:
    data = batch(producer_id=7, epoch=0, sequence=-1)
    assert refused(data).message == "Invalid sequence number"


def test_a_compacted_topic_refuses_records_without_keys_naming_each() -> None:
    data = batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")])
    compacted = replace(LIMITS, **{"compacted": True})
    error = refused(data, compacted)
    assert error.error is ErrorCode.INVALID_RECORD
    assert [i for i, _ in error.record_errors] == [1, 3]
    assert "without key" in error.record_errors[0][1]


def test_timestamps_out_of_bounds_are_invalid_timestamp_naming_each() -> None:
    hour = 3_600_000
    data = batch(records(4), timestamps=[NOW, NOW + 2 * hour, NOW - 1, NOW + 3 * hour])
    error = refused(data)
    assert error.error is ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in error.record_errors] == [1, 3]
    # No lower bound by default (message.timestamp.before.max.ms is Long.MAX_VALUE).
    check_produced(batch(timestamp=0), LIMITS, NOW, 9)


def test_a_batch_claiming_log_append_time_is_read_as_kafkas_validator_reads_it() -> None:
    # LogValidator reads each record of such a batch at the batch's max timestamp: refused
    # on a LogAppendTime topic or without one; on a CreateTime topic checked as any
    # timestamp, and stored as a CreateTime batch.
    def claiming(max_ts: int) -> bytes:
        data = bytearray(batch(records(2), timestamps=[NOW - 10, NOW - 5]))
        data[22] |= 0x08
        struct.pack_into(">q", data, 35, max_ts)
        return recrc(data)

    appended = replace(LIMITS, **{"log_append_time": True})
    for data, limits in [(claiming(NOW - 5), appended), (claiming(-1), LIMITS)]:
        error = refused(data, limits)
        assert error.error is ErrorCode.INVALID_TIMESTAMP
        assert [i for i, _ in error.record_errors] == [0, 1]
    late = refused(claiming(NOW + 3_600_001))
    assert late.error is ErrorCode.INVALID_TIMESTAMP and "out of range" in late.record_errors[0][1]
    out, info = check_produced(claiming(NOW - 7), LIMITS, NOW, 9)
    assert not info.log_append_time and info.max_timestamp == NOW - 7
    parsed = DefaultRecordBatch(bytes(out))
    assert parsed.validate_crc() and parsed.timestamp_type == 0


def test_log_append_time_topics_stamp_the_batch_with_a_valid_crc() -> None:
    appended = replace(LIMITS, **{"log_append_time": True})
    out, info = check_produced(batch(timestamp=5), appended, NOW, 9)
    assert info.log_append_time and info.max_timestamp == NOW
    parsed = DefaultRecordBatch(bytes(out))
    assert parsed.validate_crc()
    assert [r.timestamp for r in parsed] == [NOW]


def test_a_wrong_max_timestamp_is_corrected_as_kafka_does() -> None:
    data = bytearray(batch(records(2), timestamps=[NOW - 10, NOW - 5]))
    struct.pack_into(">q", data, 35, NOW + 99)  # the producer's claim
    out, info = check_produced(recrc(data), LIMITS, NOW, 9)
    assert info.max_timestamp == NOW - 5 == batch_info(out).max_timestamp
    assert DefaultRecordBatch(bytes(out)).validate_crc()


@pytest.mark.parametrize(
    "damage",
    ["none", "magic", "crc", "count", "control", "key"],
)
def test_nothing_of_a_refused_batch_is_appended(damage: str) -> None:
    plane = Plane()
    topic = plane.topic("t", configs={"cleanup.policy": "compact"})
    good = batch(records(2))
    assert plane.produce(topic, good).base_offset == 0
    data = bytearray(batch(records(3)))
    if damage == "magic":
        data[16] = 1
    elif damage == "crc":
        data[-1] ^= 1
    elif damage == "count":
        struct.pack_into(">i", data, 57, 9)
        recrc(data)
    elif damage == "control":
        data[22] |= 0x20
        recrc(data)
    elif damage == "key":
        data = bytearray(batch([(b"k", b"1"), (None, b"2")]))
    outcome = plane.produce(topic, bytes(data))
    state = plane.data.partitions[("t", 0)]
    if damage == "none":
        assert outcome.error is ErrorCode.NONE and outcome.base_offset == 2
        assert state.log.next_offset == 5
        return
    assert outcome.error is not ErrorCode.NONE and outcome.base_offset == -1
    assert state.log.next_offset == 2 == state.log.high_watermark
    assert state.log.read(0, 1 << 20) == _with_offset(good, 0)


def _with_offset(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">q", out, 0, offset)
    struct.pack_into(">i", out, 12, 0)  # the leader epoch the log stamps
    return bytes(out)


@pytest.mark.parametrize(
    ("at", "byte", "message"),
    [
        (69, 0x09, "Found invalid number of record headers -5"),  # a negative count
        (69, 0x02, "Found invalid number of record headers 1"),  # a header with no bytes
        (65, 0x08, "Invalid record size at record 0"),  # a key of 4 bytes in a record of 8
        (67, 0x00, "Found invalid number of record headers 59"),  # the value read as headers
    ],
    ids=["negative-headers", "missing-header", "key-past-record", "value-read-as-headers"],
)
def test_a_record_whose_fields_lie_about_its_size_is_invalid_record(
    at: int, byte: int, message: str
) -> None:
    # As Kafka's DefaultRecord.readFrom checks each record: one that does not parse to its
    # length would be acknowledged, then stop every consumer of the partition (and the
    # cleaner) at its offset.
    data = bytearray(batch([(b"k", b"v")]))
    assert data[61:] == bytes.fromhex("10000000026b027600")  # length 8, key k, value v, 0 headers
    data[at] = byte
    error = refused(recrc(data))
    assert error.error is ErrorCode.INVALID_RECORD
    assert message in error.message


def test_records_with_headers_and_null_keys_and_values_walk_as_kafka_reads_them() -> None:
    data = batch([(None, None), (b"", b""), (b"k", None)], headers=[("h", b""), ("", b"x")])
    out, info = check_produced(data, LIMITS, NOW, 9)
    assert bytes(out) == data and info.records == 3


@pytest.mark.parametrize(
    ("sent", "stored"),
    [(0, 1), (0, 2), (0, 3), (0, 4), (4, 0), (1, 4), (3, 3)],
    ids=["none>gzip", "none>snappy", "none>lz4", "none>zstd", "zstd>none", "gzip>zstd", "same"],
)
def test_a_topics_compression_type_is_what_is_stored(sent: int, stored: int) -> None:
    # As Kafka's LogValidator: the topic's codec, whatever the producer's; the records, their
    # offsets and timestamps unchanged.
    data = batch(records(40), compression=sent, producer_id=7, epoch=1, sequence=5)
    assert DefaultRecordBatch(data).compression_type == sent
    out, info = check_produced(data, replace(LIMITS, compression=stored), NOW, 9)
    if sent == stored:
        assert bytes(out) == data
    parsed = DefaultRecordBatch(bytes(out))
    assert parsed.validate_crc() and parsed.compression_type == stored
    assert (info.records, info.producer_id, info.base_sequence) == (40, 7, 5)
    before = [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(data)]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in parsed] == before


def test_a_batch_that_compression_type_makes_too_large_is_message_too_large() -> None:
    data = batch([(b"k", os.urandom(2000))])  # random bytes: gzip only adds its framing
    limits = replace(LIMITS, max_message_bytes=len(data), compression=1)
    error = refused(data, limits)
    assert error.error is ErrorCode.MESSAGE_TOO_LARGE
    assert "under compression.type" in error.message


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_codec_id_is_unknown_server_error_as_kafka_answers(codec: int) -> None:
    # CompressionType.forId throws IllegalArgumentException; ReplicaManager's catch-all
    # answers it UNKNOWN_SERVER_ERROR.
    data = bytearray(batch(records(3)))
    attributes = struct.unpack_from(">h", data, ATTRIBUTES_AT)[0]
    struct.pack_into(">h", data, ATTRIBUTES_AT, (attributes & ~7) | codec)
    error = refused(recrc(data))
    assert error.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert error.message == f"Unknown compression type id: {codec}"
