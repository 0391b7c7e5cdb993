"""Producer state snapshots beside a partition's segments, in Kafka's `.snapshot` format.

Kafka writes one at each segment roll and at a clean shutdown, named by the offset the state
is complete up to (`00000000000000001000.snapshot`), and at start loads the latest one not
past the log's end before reading the batches after it. The file is Kafka's ProducerSnapshot
v1: an int16 version, a uint32 CRC-32C of everything after it, then an int32 count of
entries, each a producer id (int64), epoch (int16), last sequence (int32), last offset
(int64), offset delta (int32, last sequence minus the first of the last batch), max timestamp
(int64), coordinator epoch (int32) and current transaction first offset (int64, -1).

A snapshot is advice, never the only copy of anything: one that is torn, fails its CRC or lies
past the log's end (its batches lost in a crash) is deleted and an older one, or the batches
alone, serve instead.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import TYPE_CHECKING, NamedTuple

from minicoord.storage import batch

if TYPE_CHECKING:
    # Annotations only: a server that keeps its logs in memory does without pathlib.
    from pathlib import Path

log = logging.getLogger("minicoord.storage")

SUFFIX = ".snapshot"
VERSION = 1
# Snapshots kept per partition: the newest, and the one before it for a newest one torn.
KEEP = 2

_HEAD = struct.Struct(">hI")  # version, CRC
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = _HEAD.size


class SnapshotEntry(NamedTuple):
    """One producer's state as of its last batch."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int


class CorruptSnapshot(ValueError):
    pass


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def encode(entries: list[SnapshotEntry]) -> bytes:
    body = _COUNT.pack(len(entries)) + b"".join(_ENTRY.pack(*entry, -1, -1) for entry in entries)
    return _HEAD.pack(VERSION, batch.crc32c(body)) + body


def decode(data: bytes) -> list[SnapshotEntry]:
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshot(f"{len(data)} bytes is too short")
    version, crc = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshot(f"version {version} is not {VERSION}")
    (count,) = _COUNT.unpack_from(data, _CRC_FROM)
    start = _CRC_FROM + _COUNT.size
    if count < 0 or len(data) != start + count * _ENTRY.size:
        raise CorruptSnapshot(f"{count} entries do not fill {len(data)} bytes")
    if batch.crc32c(data[_CRC_FROM:]) != crc:
        raise CorruptSnapshot("CRC-32C mismatch")
    return [
        SnapshotEntry(*_ENTRY.unpack_from(data, start + i * _ENTRY.size)[:6]) for i in range(count)
    ]


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the directory's snapshots, oldest first."""
    offsets = []
    for path in directory.glob("*" + SUFFIX):
        stem = path.name[: -len(SUFFIX)]
        # Regular files only, as Kafka's isSnapshotFile: anything else of the name is not ours.
        if stem.isdigit() and path.is_file():
            offsets.append(int(stem))
    return sorted(offsets)


def write(directory: Path, offset: int, entries: list[SnapshotEntry]) -> None:
    """Write the snapshot at `offset` (replacing one of that offset) and drop all but the
    newest KEEP. Not fsynced, as Kafka does not at a roll: a snapshot lost or torn by a power
    cut fails its CRC and an older one serves."""
    path = directory / snapshot_name(offset)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(encode(entries))
    os.replace(tmp, path)
    for old in snapshot_offsets(directory)[:-KEEP]:
        _discard(directory / snapshot_name(old))


def latest(directory: Path, log_end: int) -> tuple[int, list[SnapshotEntry]] | None:
    """The newest sound snapshot at or before `log_end`, as (offset, entries). Snapshots past
    the end (the log lost what they describe) and unreadable ones are deleted on the way."""
    for offset in reversed(snapshot_offsets(directory)):
        path = directory / snapshot_name(offset)
        if offset > log_end:
            log.info("%s: past the log's end (%d); deleted", path, log_end)
            _discard(path)
            continue
        try:
            return offset, decode(path.read_bytes())
        except (OSError, CorruptSnapshot) as exc:
            log.warning("%s: %s; deleted, an older snapshot or the log serves instead", path, exc)
            _discard(path)
    return None


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("%s: not deleted: %s", path, exc)
