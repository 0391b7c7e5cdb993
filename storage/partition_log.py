"""One `__consumer_offsets` partition on disk: a directory of segments named by base offset.

Rules it keeps:
- Appends go to the last (active) segment only; a segment is closed when the next batch would
  take it past `segment_bytes`, and closed segments change only by the cleaner's atomic swap.
- Opening a log verifies every batch. A damaged batch with no valid batch after it (a torn
  write, a flipped bit in the last batch) is the tail: it is cut off, with a log line naming
  the file and position. A damaged batch with valid data after it is corruption that cannot be
  repaired without losing acknowledged records: opening fails with `CorruptLog` and nothing is
  skipped silently.
- A cleaner swap is crash-safe: `B-E.log.cleaned` is an unfinished cleaning (deleted at
  open); `B-E.log.swap` is a finished one, replacing the segments with base offsets in
  [B, E), whose swap-in was interrupted (completed at open).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from minicoord.protocol.records import Record
from minicoord.storage.batch import (
    CorruptBatch,
    StoredRecord,
    batch_extent,
    check_batch,
    decode_batch,
    encode_batch,
)

log = logging.getLogger("minicoord.storage")

SUFFIX = ".log"
CLEANED = ".log.cleaned"
SWAP = ".log.swap"


class CorruptLog(Exception):
    def __init__(self, path: Path, position: int, reason: str) -> None:
        super().__init__(f"{path} at byte {position}: {reason}, with valid data after it")
        self.path = path
        self.position = position
        self.reason = reason


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def swap_name(base: int, end: int, suffix: str) -> str:
    return f"{base:020d}-{end:020d}{suffix}"


def swap_range(name: str) -> tuple[int, int]:
    base, end = name.split(".", 1)[0].split("-")
    return int(base), int(end)


def partition_dir(data_dir: Path, partition: int) -> Path:
    return data_dir / f"__consumer_offsets-{partition}"


_PARTITION_DIR = re.compile(r"__consumer_offsets-(\d+)")


def partitions_in(data_dir: Path) -> list[int]:
    """The offsets partitions that have a directory under data_dir."""
    found = []
    for entry in data_dir.iterdir() if data_dir.is_dir() else ():
        match = _PARTITION_DIR.fullmatch(entry.name)
        if match and entry.is_dir():
            found.append(int(match.group(1)))
    return sorted(found)


@dataclass(slots=True)
class Segment:
    path: Path
    base_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Truncation:
    path: Path
    position: int
    removed_bytes: int
    reason: str


class PartitionLog:
    def __init__(self, directory: Path, partition: int, segment_bytes: int) -> None:
        self.directory = directory
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self.next_offset = 0
        self.truncations: list[Truncation] = []
        # Bytes at the head of the closed segments that the cleaner already compacted.
        self.cleaned_bytes = 0
        self._fd: int | None = None
        # Guards `segments` between the event loop (append, roll) and the cleaner thread.
        self.lock = threading.Lock()

    # -- opening and recovery ---------------------------------------------------------------

    def open(self) -> None:
        """Find the segments, finish or drop interrupted cleanings, and check every batch.

        Truncates a damaged tail; raises CorruptLog for damage before valid data.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self._finish_interrupted_swaps()
        paths = sorted(self.directory.glob("*" + SUFFIX))
        self.segments = [Segment(p, int(p.name[: -len(SUFFIX)]), p.stat().st_size) for p in paths]
        if not self.segments:
            self._new_segment(0)
        for index, segment in enumerate(self.segments):
            last = index == len(self.segments) - 1
            self.next_offset = max(self.next_offset, self._verify(segment, last))
        self._open_active()

    def _verify(self, segment: Segment, last: bool) -> int:
        """Check each batch; returns the offset after the segment's last record."""
        data = segment.path.read_bytes()
        scan = scan_segment(data, segment.base_offset)
        if scan.damage_at is not None:
            assert scan.reason is not None
            if not last or scan.valid_after:
                raise CorruptLog(segment.path, scan.damage_at, scan.reason)
            self._truncate(segment, scan.damage_at, len(data) - scan.damage_at, scan.reason)
        return scan.next_offset

    def _truncate(self, segment: Segment, position: int, removed: int, reason: str) -> None:
        log.warning(
            "truncating %s at byte %d (%d bytes dropped): %s",
            segment.path,
            position,
            removed,
            reason,
        )
        with open(segment.path, "r+b") as f:
            f.truncate(position)
            f.flush()
            os.fsync(f.fileno())
        segment.size = position
        self.truncations.append(Truncation(segment.path, position, removed, reason))

    def _finish_interrupted_swaps(self) -> None:
        for cleaned in self.directory.glob("*" + CLEANED):
            cleaned.unlink()
        for swap in self.directory.glob("*" + SWAP):
            base, end = swap_range(swap.name)
            for path in self.directory.glob("*" + SUFFIX):
                other = int(path.name[: -len(SUFFIX)])
                if base < other < end:
                    path.unlink()
            os.replace(swap, self.directory / segment_name(base))
        fsync_dir(self.directory)

    # -- appending --------------------------------------------------------------------------

    def append(self, records: Sequence[Record], timestamp: int) -> int:
        """Write one batch; returns its base offset. Written to the OS, not yet fsync'd."""
        base = self.next_offset
        data = encode_batch(base, records, timestamp)
        active = self.segments[-1]
        if active.size and active.size + len(data) > self.segment_bytes:
            self._roll(base)
            active = self.segments[-1]
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        active.size += len(data)
        self.next_offset = base + len(records)
        return base

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def roll(self) -> None:
        """Close the active segment now (offline compaction cleans everything this way)."""
        if self.segments[-1].size:
            self._roll(self.next_offset)

    def _roll(self, base_offset: int) -> None:
        self.flush()
        with self.lock:
            self._new_segment(base_offset)
        self._open_active()

    def _new_segment(self, base_offset: int) -> None:
        path = self.directory / segment_name(base_offset)
        path.touch()
        fsync_dir(self.directory)
        self.segments.append(Segment(path, base_offset, 0))

    def _open_active(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.segments[-1].path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- reading ----------------------------------------------------------------------------

    def read(self) -> Iterator[StoredRecord]:
        """Every record, oldest first (the log must have been opened and so verified)."""
        with self.lock:
            segments = list(self.segments)
        for segment in segments:
            yield from records_of(segment.path.read_bytes())

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)


@dataclass(frozen=True, slots=True)
class SegmentScan:
    next_offset: int
    batches: int
    damage_at: int | None = None
    reason: str | None = None
    # Whether an intact batch follows the damage: then it is not a torn tail.
    valid_after: bool = False


def scan_segment(data: bytes, base_offset: int) -> SegmentScan:
    """Verify a segment's batches up to the first damaged one (read-only)."""
    pos = 0
    batches = 0
    next_offset = base_offset
    while pos < len(data):
        extent = batch_extent(data, pos)
        if extent is None:
            reason = "partial batch header"
        elif extent[1] < 0 or pos + extent[1] > len(data):
            reason = "batch runs past the end of the file"
        else:
            try:
                batch = check_batch(memoryview(data)[pos : pos + extent[1]])
            except CorruptBatch as exc:
                reason = str(exc)
            else:
                # The base offset lies outside the CRC (as in Kafka's format), so a flipped
                # bit there passed unseen: it could move the log's next offset backwards, and
                # the next roll then reused the active segment's name and lost appends. A base
                # offset below its segment's is damage; any other may only move it forward.
                if batch.base_offset < base_offset:
                    reason = f"base offset {batch.base_offset} is below the segment's {base_offset}"
                else:
                    end = batch.base_offset + batch.last_offset_delta + 1
                    next_offset = max(next_offset, end)
                    batches += 1
                    pos += extent[1]
                    continue
        return SegmentScan(next_offset, batches, pos, reason, _valid_batch_after(data, pos + 1))
    return SegmentScan(next_offset, batches)


def records_of(data: bytes) -> Iterator[StoredRecord]:
    pos = 0
    while pos < len(data):
        extent = batch_extent(data, pos)
        if extent is None or pos + extent[1] > len(data):
            return
        yield from decode_batch(memoryview(data)[pos : pos + extent[1]])
        pos += extent[1]


def _valid_batch_after(data: bytes, start: int) -> bool:
    """Whether any intact batch begins at or after start: then the damage is not the tail."""
    view = memoryview(data)
    for pos in range(start, len(data) - 16):
        if data[pos + 16] != 2:  # magic byte of a v2 batch
            continue
        extent = batch_extent(data, pos)
        if extent is None or extent[1] <= 12 or pos + extent[1] > len(data):
            continue
        try:
            check_batch(view[pos : pos + extent[1]])
        except CorruptBatch:
            continue
        return True
    return False


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
