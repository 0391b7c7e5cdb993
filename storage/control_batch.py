"""Transaction markers: the control batches that end a transaction in a partition's log.

Kafka's format (ControlRecordType, EndTransactionMarker): a batch with the control and
transactional attribute bits, the transaction's producer id and epoch, no sequence, and one
record whose key is (version 0: int16, type: int16, 0 abort or 1 commit) and whose value is
(version 0: int16, coordinator epoch: int32). Consumers skip these batches; a read_committed
consumer uses them, with the Fetch answer's aborted-transaction list, to drop aborted data.
"""

from __future__ import annotations

import struct

from minicoord.storage.batch import (
    _AFTER_CRC,
    _BEFORE_CRC,
    CONTROL,
    HEADER_SIZE,
    MAGIC,
    NO_SEQUENCE,
    PREFIX_SIZE,
    TRANSACTIONAL,
    crc32c,
)

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
# A control record's attributes, timestamp delta and offset delta (all zero), then the key's
# length (4, as a zig-zag varint: 8).
_RECORD_HEAD = b"\x00\x00\x00\x08"


def encode_marker(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
) -> bytearray:
    """One transaction marker, as Kafka's broker writes it on WriteTxnMarkers."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    # length, attributes .. key, value length (6: zig-zag 12), value, no headers
    body = _RECORD_HEAD + key + b"\x0c" + value + b"\x00"
    record = bytes([len(body) << 1]) + body
    tail = _AFTER_CRC.pack(
        CONTROL | TRANSACTIONAL, 0, timestamp, timestamp, producer_id, producer_epoch,
        NO_SEQUENCE, 1,
    )  # fmt: skip
    covered = tail + record
    size = HEADER_SIZE + len(record)
    head = _BEFORE_CRC.pack(base_offset, size - PREFIX_SIZE, 0, MAGIC, crc32c(covered))
    return bytearray(head + covered)


def marker_type(batch: bytes | bytearray | memoryview) -> int | None:
    """COMMIT or ABORT for a control batch holding a transaction marker (None otherwise)."""
    if len(batch) < HEADER_SIZE + len(_RECORD_HEAD) + 1 + _KEY.size:
        return None
    at = HEADER_SIZE + 1 + len(_RECORD_HEAD)
    if bytes(batch[HEADER_SIZE + 1 : at]) != _RECORD_HEAD:
        return None
    version, kind = _KEY.unpack_from(batch, at)
    return kind if version == 0 and kind in (ABORT, COMMIT) else None
