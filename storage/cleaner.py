"""Log compaction: rewrite a partition's closed segments keeping the latest value per key.

Tombstones (null values) whose key has nothing newer are kept for
`log.cleaner.delete.retention.ms` after they were written, so a reader that replays the log
meanwhile still learns of the deletion, then dropped. The active segment is never touched.

The cleaned records go to `B-E.log.cleaned`, fsync'd, renamed to `B-E.log.swap` (the commit
point), and swapped in: the segments in [B, E) are removed and the swap file becomes
`B.log`. A crash at any step leaves a log that opens to the same records (see
PartitionLog.open). The work runs in a thread; only the swap holds the log's lock.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from minicoord.storage.batch import StoredRecord, batch_extent, decode_batch, encode_stored
from minicoord.storage.partition_log import (
    CLEANED,
    SWAP,
    PartitionLog,
    Segment,
    fsync_dir,
    records_of,
    segment_name,
    swap_name,
)


@dataclass(frozen=True, slots=True)
class CleanResult:
    partition: int
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    records_before: int
    records_after: int
    seconds: float


def dirty_ratio(plog: PartitionLog) -> float:
    """Share of the closed segments' bytes not yet cleaned."""
    with plog.lock:
        closed = plog.segments[:-1]
    closed_bytes = sum(s.size for s in closed)
    if not closed_bytes:
        return 0.0
    return max(0, closed_bytes - plog.cleaned_bytes) / closed_bytes


def clean(plog: PartitionLog, now_ms: int, delete_retention_ms: int) -> CleanResult | None:
    started = time.perf_counter()
    with plog.lock:
        segments = list(plog.segments)
    closed, active = segments[:-1], segments[-1]
    if not closed:
        return None
    # The newest offset of every key in the whole log, the active segment included.
    latest: dict[bytes, int] = {}
    for segment in segments:
        for record in records_of(segment.path.read_bytes()):
            latest[record.key] = record.offset
    out = bytearray()
    before = after = 0
    for segment in closed:
        data = segment.path.read_bytes()
        pos = 0
        while pos < len(data):
            extent = batch_extent(data, pos)
            assert extent is not None
            kept: list[StoredRecord] = []
            for r in decode_batch(memoryview(data)[pos : pos + extent[1]]):
                before += 1
                if latest[r.key] != r.offset:
                    continue
                if r.value is None and r.timestamp + delete_retention_ms <= now_ms:
                    continue
                kept.append(r)
            if kept:
                out += encode_stored(kept)
                after += len(kept)
            pos += extent[1]
    base, end = closed[0].base_offset, active.base_offset
    directory = plog.directory
    cleaned = directory / swap_name(base, end, CLEANED)
    with open(cleaned, "wb") as f:
        f.write(out)
        f.flush()
        os.fsync(f.fileno())
    swap = directory / swap_name(base, end, SWAP)
    os.replace(cleaned, swap)
    fsync_dir(directory)
    target = directory / segment_name(base)
    with plog.lock:
        for segment in closed[1:]:
            segment.path.unlink()
        os.replace(swap, target)
        fsync_dir(directory)
        plog.segments[: len(closed)] = [Segment(target, base, len(out))]
        plog.cleaned_bytes = len(out)
    return CleanResult(
        plog.partition,
        len(closed),
        sum(s.size for s in closed),
        len(out),
        before,
        after,
        time.perf_counter() - started,
    )
