"""Walking a segment's bytes batch by batch: verifying (open, offline tools) and reading.

A scan never holds a whole segment: it reads SCAN_CHUNK bytes at a time, and a batch larger
than that is read whole on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.storage.batch import (
    MIN_BATCH_SIZE,
    BatchInfo,
    CorruptBatch,
    StoredRecord,
    batch_extent,
    batch_info,
    check_batch,
    decode_batch,
    iter_batches,
)

if TYPE_CHECKING:
    from minicoord.storage.segment import Reader, Segment

SCAN_CHUNK = 1 << 20

BatchCallback = Callable[[BatchInfo], None]


@dataclass(frozen=True, slots=True)
class SegmentScan:
    next_offset: int
    batches: int
    damage_at: int | None = None
    reason: str | None = None
    # Whether an intact batch follows the damage: then it is not a torn tail.
    valid_after: bool = False


def scan_batches(
    read: Callable[[int, int], bytes],
    size: int,
    base_offset: int,
    segment: Segment | None = None,
    on_batch: BatchCallback | None = None,
    verify: bool = True,
) -> SegmentScan:
    """Walk a segment's batches, verifying each, up to the first damaged one (read-only).

    Reads SCAN_CHUNK bytes at a time. With `segment`, its index and bookkeeping are rebuilt
    from the sound batches.
    """
    if segment is not None:
        segment.reset_index()
    pos = 0
    batches = 0
    next_offset = base_offset
    chunk_at, chunk = 0, read(0, min(size, SCAN_CHUNK))
    while pos < size:
        rel = pos - chunk_at
        extent = batch_extent(chunk, rel)
        spills = extent is not None and MIN_BATCH_SIZE <= extent[1] <= size - pos
        if extent is None or (spills and rel + extent[1] > len(chunk)):
            # The batch (or its prefix) runs past this chunk: read on from here.
            chunk_at, rel = pos, 0
            want = max(extent[1] if extent else 0, SCAN_CHUNK)
            chunk = read(pos, min(size - pos, want))
            extent = batch_extent(chunk, 0)
            if extent is not None and len(chunk) < extent[1] <= size - pos:
                # Only now is its length known (the last chunk cut its prefix), and it is
                # larger than a chunk: read it whole.
                chunk = read(pos, extent[1])
        reason: str
        if extent is None:
            reason = "partial batch header"
        elif extent[1] < MIN_BATCH_SIZE or extent[1] > size - pos:
            reason = "batch runs past the end of the file"
        else:
            data = memoryview(chunk)[rel : rel + extent[1]]
            try:
                if verify:
                    check_batch(data)
                info = batch_info(data)
            except CorruptBatch as exc:
                reason = str(exc)
            else:
                # The base offset lies outside the CRC (as in Kafka's format), so a flipped
                # bit there passed unseen: it could move the log's next offset backwards, and
                # the next roll then reused the active segment's name and lost appends. A base
                # offset below its segment's is damage; any other may only move it forward.
                if info.base_offset < base_offset:
                    reason = f"base offset {info.base_offset} is below the segment's {base_offset}"
                else:
                    next_offset = max(next_offset, info.next_offset)
                    if segment is not None:
                        segment.note_batch(
                            pos, info.base_offset, next_offset, info.max_timestamp, info.size
                        )
                    if on_batch is not None:
                        on_batch(info)
                    batches += 1
                    pos += extent[1]
                    continue
        after = _valid_batch_after(read, size, pos + 1, next_offset)
        return SegmentScan(next_offset, batches, pos, reason, after)
    return SegmentScan(next_offset, batches)


def scan_segment(data: bytes, base_offset: int) -> SegmentScan:
    """Verify a whole segment's bytes (the offline tools)."""
    return scan_batches(lambda p, n: data[p : p + n], len(data), base_offset)


def read_batches(read: Reader, size: int) -> Iterator[memoryview]:
    """The whole batches of `size` bytes behind `read`, a chunk at a time."""
    pos = 0
    while pos < size:
        chunk = read(pos, min(size - pos, SCAN_CHUNK))
        taken = 0
        for batch in iter_batches(chunk):
            taken += len(batch)
            yield batch
        if not taken:  # a batch larger than the chunk
            extent = batch_extent(chunk, 0)
            if extent is None or extent[1] < MIN_BATCH_SIZE:
                return
            whole = read(pos, extent[1])
            if len(whole) < extent[1]:
                return
            taken = len(whole)
            yield memoryview(whole)
        pos += taken


def records_of(data: bytes) -> Iterator[StoredRecord]:
    for batch in iter_batches(data):
        yield from decode_batch(batch)


def _valid_batch_after(
    read: Callable[[int, int], bytes], size: int, start: int, next_offset: int
) -> bool:
    """Whether the log goes on, intact, after damage at `start - 1`: a sound batch at or
    after `start`, at or past the log's next offset, from which sound batches follow one
    another to the end of the file. Then the damage is not a torn tail.

    The chain is what tells the rest of a log from a batch image inside a torn batch's own
    bytes (a value holding a copy of a segment, cut by a crash right after the copy): a
    copy's next bytes are the value's, not a batch, and its offsets are old ones."""
    data = read(start, size - start) if start < size else b""
    view = memoryview(data)
    for pos in range(0, len(data) - 16):
        if data[pos + 16] != 2:  # magic byte of a v2 batch
            continue
        size = _sound(data, view, pos, next_offset)
        if size and _sound_to_the_end(data, view, pos + size):
            return True
    return False


def _sound(data: bytes, view: memoryview, pos: int, min_offset: int) -> int:
    """The size of the intact batch at `pos` with a base offset of at least `min_offset`,
    else 0."""
    extent = batch_extent(data, pos)
    if extent is None or extent[0] < min_offset:
        return 0
    if extent[1] < MIN_BATCH_SIZE or pos + extent[1] > len(data):
        return 0
    try:
        check_batch(view[pos : pos + extent[1]])
    except CorruptBatch:
        return 0
    return extent[1]


def _sound_to_the_end(data: bytes, view: memoryview, pos: int) -> bool:
    while pos < len(data):
        size = _sound(data, view, pos, 0)
        if not size:
            return False
        pos += size
    return True
