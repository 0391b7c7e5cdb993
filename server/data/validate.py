"""Checking a producer's batch before it is appended (Kafka's LogValidator, for magic 2).

Pure functions over bytes: `check_produced` returns the batch ready to append (a private copy
whose header the log may rewrite) and its header, or raises `InvalidBatch` with the error
code Kafka answers, its message and (for record-level problems) the offending records;
nothing of a refused batch is ever appended. The checks and their codes follow Kafka's order:
framing (CORRUPT_MESSAGE / INVALID_RECORD), size (MESSAGE_TOO_LARGE), CRC (CORRUPT_MESSAGE),
the batch header (INVALID_RECORD), then every record (INVALID_RECORD, INVALID_TIMESTAMP).

Records are walked without building objects: per record its length, attributes, timestamp
and offset deltas and key length, which is what the checks need. A compressed batch is
decompressed to be walked (Kafka does the same) but stored exactly as the producer sent it.
"""

from __future__ import annotations

import struct

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.storage.batch import (
    COMPRESSION_MASK,
    CONTROL,
    HEADER_SIZE,
    MAGIC,
    MAGIC_AT,
    NO_PRODUCER_ID,
    PREFIX_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchInfo,
    batch_info,
    crc_valid,
    read_zigzag,
    recompress,
    set_log_append_time,
    set_max_timestamp,
)

ZSTD = 4
_PREFIX = struct.Struct(">qi")
# Kafka's smallest legacy batch overhead: a length field below it is not a batch at all.
MIN_LENGTH_FIELD = 14


TIMESTAMPS_REJECTED = "One or more records have been rejected due to invalid timestamp"


class InvalidBatch(Exception):
    def __init__(
        self,
        error: ErrorCode,
        message: str,
        record_errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        # (index of the record in the batch, why), for ProduceResponse's record_errors (v8+).
        self.record_errors = record_errors


@dataclass(frozen=True, slots=True)
class Limits:
    """The topic's configs that decide whether a batch is accepted."""

    max_message_bytes: int
    segment_bytes: int
    log_append_time: bool
    compacted: bool
    # message.timestamp.before.max.ms / after.max.ms (CreateTime only).
    before_max_ms: int
    after_max_ms: int
    # The most a compressed batch may decompress to (server/data/decompress.py).
    decompressed_max: int = 104_857_600
    # The topic's compression.type as a codec; None: stored as the producer compressed it.
    compression: int | None = None


def check_produced(
    records: bytes | bytearray | memoryview | None, limits: Limits, now: int, version: int
) -> tuple[bytearray, BatchInfo]:
    """Validate one partition's records from a Produce request; the batch to append."""
    size = _frame(records)
    assert records is not None
    if records[MAGIC_AT] != MAGIC:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Produce requests must carry record batches of magic {MAGIC}, not {records[MAGIC_AT]}",
        )
    if size < HEADER_SIZE:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"a batch of {size} bytes is truncated")
    info = batch_info(records)
    compression = info.attributes & COMPRESSION_MASK
    if compression == ZSTD and version < 7:
        raise InvalidBatch(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
    if info.base_offset != 0:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD, f"the batch's base offset is {info.base_offset}, not 0"
        )
    if size > limits.max_message_bytes:
        raise InvalidBatch(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"the batch is {size} bytes, larger than max.message.bytes={limits.max_message_bytes}",
        )
    if not crc_valid(memoryview(records)[:size]):
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "the batch's CRC-32C does not match")
    if info.records <= 0 or info.last_offset_delta + 1 != info.records:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Inconsistent batch offset range ({info.last_offset_delta + 1}) and count of "
            f"records ({info.records})",
        )
    if info.attributes & CONTROL:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records"
        )
    if info.producer_id != NO_PRODUCER_ID and info.base_sequence < 0:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "Invalid sequence number")
    if compression == 0:
        body: bytes | bytearray | memoryview = records
        start, end = HEADER_SIZE, size
    else:
        if compression > ZSTD:
            # Kafka's CompressionType.forId throws IllegalArgumentException, which the
            # produce path answers with UNKNOWN_SERVER_ERROR (not retriable, where a Java
            # client would retry CORRUPT_MESSAGE).
            raise InvalidBatch(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {compression}"
            )
        from minicoord.server.data.decompress import TooLarge, decompress

        try:
            body = decompress(
                compression, bytes(memoryview(records)[HEADER_SIZE:size]), limits.decompressed_max
            )
        except TooLarge:
            raise InvalidBatch(
                ErrorCode.INVALID_RECORD,
                f"the batch decompresses to more than {limits.decompressed_max} bytes "
                "(socket.request.max.bytes)",
            ) from None
        except Exception as exc:
            raise InvalidBatch(
                ErrorCode.CORRUPT_MESSAGE, f"the batch does not decompress: {exc}"
            ) from exc
        start, end = 0, len(body)
    claims_append_time = bool(info.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    check_timestamps = not limits.log_append_time and not claims_append_time
    max_ts = _walk_records(body, start, end, info, limits, now if check_timestamps else None)
    if claims_append_time:
        _check_claimed_append_time(info, limits, now)
        max_ts = info.max_timestamp  # what Kafka read as every record's timestamp
    if size > limits.segment_bytes:
        raise InvalidBatch(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"the batch is {size} bytes, larger than segment.bytes={limits.segment_bytes}",
        )
    batch = bytearray(memoryview(records)[:size])
    if limits.compression is not None and limits.compression != compression:
        # As Kafka's LogValidator: stored under the topic's codec, and refused if that makes
        # it larger than max.message.bytes.
        batch = recompress(batch, bytes(body[start:end]), limits.compression)
        if len(batch) > limits.max_message_bytes:
            raise InvalidBatch(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the batch is {len(batch)} bytes under compression.type, larger than "
                f"max.message.bytes={limits.max_message_bytes}",
            )
        info = batch_info(batch)
    if limits.log_append_time:
        set_log_append_time(batch, now)
        return batch, batch_info(batch)
    if max_ts != info.max_timestamp or claims_append_time:
        # As Kafka does: the batch says what its records say, whatever the producer wrote,
        # and it is a CreateTime batch on a CreateTime topic.
        set_max_timestamp(batch, max_ts)
        info = batch_info(batch)
    return batch, info


def _check_claimed_append_time(info: BatchInfo, limits: Limits, now: int) -> None:
    """A producer's batch flagged LogAppendTime, as Kafka's LogValidator reads one: each
    record at the batch's max timestamp. Refused on a LogAppendTime topic, or without a
    timestamp; on a CreateTime topic that timestamp is checked as any record's."""
    ts = info.max_timestamp
    if limits.log_append_time or ts == -1:
        why = "Producer should not set timestamp type to LogAppendTime."
        errors = [(i, f"Invalid timestamp type in message {i}. {why}") for i in range(info.records)]
    else:
        errors = [
            (i, problem)
            for i in range(info.records)
            if (problem := _out_of_range(ts, i, now, limits)) is not None
        ]
        if not errors:
            return
    raise InvalidBatch(ErrorCode.INVALID_TIMESTAMP, TIMESTAMPS_REJECTED, tuple(errors))


def _out_of_range(timestamp: int, index: int, now: int, limits: Limits) -> str | None:
    """Why a record's CreateTime is refused, in LogValidator's words; None if it is not."""
    before, after = limits.before_max_ms, limits.after_max_ms
    if timestamp == -1 or (now - timestamp <= before and timestamp - now <= after):
        return None
    return (
        f"Timestamp {timestamp} of message with offset {index} is out of range. "
        f"The timestamp should be within [{now - before}, {now + after}]"
    )


def _frame(records: bytes | bytearray | memoryview | None) -> int:
    """The size of the one batch a partition's record set must hold (ignoring a cut-off
    trailing batch, as Kafka does)."""
    if records is None or len(records) < PREFIX_SIZE:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            "Produce requests must have at least one record batch per partition",
        )
    _base, length = _PREFIX.unpack_from(records, 0)
    magic = records[MAGIC_AT] if len(records) > MAGIC_AT else 0
    if length < MIN_LENGTH_FIELD or magic > MAGIC:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"record batch length {length} is invalid")
    size = PREFIX_SIZE + length
    if size > len(records):
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            "Produce requests must have at least one record batch per partition",
        )
    rest = len(records) - size
    if rest >= PREFIX_SIZE:
        _base, length = _PREFIX.unpack_from(records, size)
        if length >= MIN_LENGTH_FIELD and PREFIX_SIZE + length <= rest:
            raise InvalidBatch(
                ErrorCode.INVALID_RECORD,
                "Produce requests are only allowed to contain exactly one record batch per "
                "partition",
            )
    return size


def _bad_record_size(index: int, length: int) -> InvalidBatch:
    return InvalidBatch(
        ErrorCode.INVALID_RECORD,
        f"Invalid record size at record {index}: its fields do not take the {length} bytes "
        "it declares",
    )


def _walk_records(
    buf: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    info: BatchInfo,
    limits: Limits,
    now: int | None,
) -> int:
    """Walk the batch's records, collecting per-record errors; the largest record timestamp.

    Structural damage raises at once (INVALID_RECORD, as Kafka does); a record breaking a
    rule (no key on a compacted topic, a timestamp out of range) is listed, and every record
    is looked at before the batch is refused.
    """
    start = pos
    first_ts = info.first_timestamp
    max_delta = min_delta = None
    errors: list[tuple[int, str]] = []
    need_keys = limits.compacted
    index = 0
    try:
        for index in range(info.records):
            # The record's length and its timestamp delta are all most batches need looked
            # at; zigzag varints, decoded inline for the usual one- and two-byte forms.
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                n = (b & 0x7F) | (buf[pos + 1] << 7)
                length = (n >> 1) ^ -(n & 1)
                pos += 2
            else:
                length, pos = read_zigzag(buf, pos)
            stop = pos + length
            if length < 6 or stop > end:
                raise IndexError
            b = buf[pos + 1]  # after the attributes byte
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                at = pos + 2
            else:
                ts_delta, at = read_zigzag(buf, pos + 1)
            if max_delta is None:
                max_delta = min_delta = ts_delta
            elif ts_delta > max_delta:
                max_delta = ts_delta
            elif ts_delta < min_delta:  # type: ignore[operator]
                min_delta = ts_delta
            # The rest of the record must parse to its exact length, as Kafka's
            # DefaultRecord.readFrom checks: a record that lies about its key, value or headers
            # would stop every consumer of the partition, and the cleaner, at that offset.
            # Each varint inline for its one-byte form (the usual one): a call per field
            # would cost this walk several times its old time.
            while buf[at] >= 0x80:  # the offset delta, only skipped
                at += 1
            b = buf[at + 1]  # the key's length
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                at += 2
            elif buf[at + 2] < 0x80:
                n = (b & 0x7F) | (buf[at + 2] << 7)
                key_length = (n >> 1) ^ -(n & 1)
                at += 3
            else:
                key_length, at = read_zigzag(buf, at + 1)
            if key_length < 0:
                if need_keys:
                    errors.append((index, "Compacted topic cannot accept message without key"))
            else:
                at += key_length
            if at >= stop:  # the value's length must follow
                raise _bad_record_size(index, length)
            b = buf[at]  # the value's length
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
                at += 1
            elif buf[at + 1] < 0x80:
                n = (b & 0x7F) | (buf[at + 1] << 7)
                value_length = (n >> 1) ^ -(n & 1)
                at += 2
            else:
                value_length, at = read_zigzag(buf, at)
            if value_length > 0:
                at += value_length
            if at >= stop:  # the header count must follow
                raise _bad_record_size(index, length)
            if buf[at] == 0 and at + 1 == stop:  # no headers: the record ends here
                pos = stop
                continue
            headers, at = read_zigzag(buf, at)
            if headers < 0 or headers > stop - at:
                raise InvalidBatch(
                    ErrorCode.INVALID_RECORD,
                    f"Found invalid number of record headers {headers} at record {index}",
                )
            for _ in range(headers):
                header_key, at = read_zigzag(buf, at)
                if header_key < 0:
                    raise InvalidBatch(
                        ErrorCode.INVALID_RECORD,
                        f"Invalid negative header key size {header_key} at record {index}",
                    )
                at += header_key
                if at >= stop:
                    raise _bad_record_size(index, length)
                header_value, at = read_zigzag(buf, at)
                at += max(header_value, 0)
            if at != stop:
                raise _bad_record_size(index, length)
            pos = stop
    except IndexError:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            "Incorrect declared batch size, premature EOF reached"
            if pos >= end
            else f"Invalid record size at record {index}",
        ) from None
    if pos != end:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD, "Incorrect declared batch size, records still remaining"
        )
    if (
        now is not None
        and max_delta is not None
        and (
            now - (first_ts + min_delta) > limits.before_max_ms  # type: ignore[operator]
            or first_ts + max_delta - now > limits.after_max_ms
        )
    ):
        # Some record is out of bounds: a second walk names each one, as Kafka lists them.
        errors.extend(_timestamp_errors(buf, start, info, limits, now))
        errors.sort()
    if errors:
        if any(m.startswith("Timestamp") for _, m in errors):
            code, message = ErrorCode.INVALID_TIMESTAMP, TIMESTAMPS_REJECTED
        else:
            code = ErrorCode.INVALID_RECORD
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
            message = (
                f"One or more records have been rejected due to {len(errors)} record errors in "
                f"total, and only showing the first three errors at most: [{shown}]"
            )
        raise InvalidBatch(code, message, tuple(errors))
    return -1 if max_delta is None else first_ts + max_delta


def _timestamp_errors(
    buf: bytes | bytearray | memoryview, pos: int, info: BatchInfo, limits: Limits, now: int
) -> list[tuple[int, str]]:
    out = []
    for index in range(info.records):
        length, pos = read_zigzag(buf, pos)
        stop = pos + length
        ts_delta, _ = read_zigzag(buf, pos + 1)
        problem = _out_of_range(info.first_timestamp + ts_delta, index, now, limits)
        if problem is not None:
            out.append((index, problem))
        pos = stop
    return out
