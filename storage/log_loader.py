"""Opening a partition log's directory (Kafka's LogLoader): the segments a `PartitionLog`
starts from, once interrupted cleanings are finished or dropped and every batch is checked.

- Every batch is verified. A damaged batch with no valid batch after it (a torn write, a
  flipped bit in the last batch) is the tail: it is cut off, with a log line naming the file
  and position, and so is an empty segment after it (rolled before a crash). A damaged batch
  with valid data after it is corruption that cannot be repaired without losing acknowledged
  records: loading fails with `CorruptLog`, nothing is skipped silently.
- A cleaner swap is crash-safe: `B-E.log.cleaned` is an unfinished cleaning (deleted here);
  `B-E.log.swap` is a finished one, replacing the segments with base offsets in [B, E), whose
  swap-in was interrupted (completed here). A cleaning writes one swap per group of segments,
  oldest first, so a crash between them leaves older groups cleaned and newer ones as they
  were, as Kafka's cleaner commits group by group.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.storage.scan import BatchCallback, scan_batches
from minicoord.storage.segment import SUFFIX, FileSegment, Segment, fsync_dir, segment_name

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger("minicoord.storage")

CLEANED = ".log.cleaned"
SWAP = ".log.swap"


class CorruptLog(Exception):
    def __init__(self, path: Path, position: int, reason: str) -> None:
        super().__init__(f"{path} at byte {position}: {reason}, with valid data after it")
        self.path = path
        self.position = position
        self.reason = reason


def swap_name(base: int, end: int, suffix: str) -> str:
    return f"{base:020d}-{end:020d}{suffix}"


def swap_range(name: str) -> tuple[int, int]:
    base, end = name.split(".", 1)[0].split("-")
    return int(base), int(end)


@dataclass(frozen=True, slots=True)
class Truncation:
    path: Path
    position: int
    removed_bytes: int
    reason: str


@dataclass(frozen=True, slots=True)
class Loaded:
    segments: list[Segment]
    # Past the last sound batch: the log end offset, unless the log starts later.
    next_offset: int
    truncations: list[Truncation]


def load_segments(
    directory: Path, log_start_offset: int, on_batch: BatchCallback | None = None
) -> Loaded:
    """The log in `directory` (made, with one empty segment, if there is none).

    Truncates a damaged tail; raises CorruptLog for damage before valid data. `on_batch`
    sees every sound batch in order (producer state is rebuilt from it).
    """
    directory.mkdir(parents=True, exist_ok=True)
    _finish_interrupted_swaps(directory)
    paths = sorted(directory.glob("*" + SUFFIX))
    sizes = [p.stat().st_size for p in paths]
    segments: list[Segment] = [
        FileSegment(p, int(p.name[: -len(SUFFIX)]), size)
        for p, size in zip(paths, sizes, strict=True)
    ]
    if not segments:
        segments = [FileSegment.create(directory, log_start_offset)]
        fsync_dir(directory)
    truncations: list[Truncation] = []
    next_offset = 0
    tail = tail_index(sizes)
    for index, segment in enumerate(segments):
        assert isinstance(segment, FileSegment)
        cut = _recover(segment, index >= tail, on_batch, truncations)
        next_offset = max(next_offset, segment.next_offset)
        if cut and index < len(segments) - 1:
            # The empty segments after a cut tail begin past the offsets it lost: drop
            # them, so that appends continue where the valid data ends.
            assert not any(sizes[index + 1 :])
            for empty in segments[index + 1 :]:
                empty.delete()
            fsync_dir(directory)
            segments = segments[: index + 1]
            break
    return Loaded(segments, next_offset, truncations)


def tail_index(sizes: Sequence[int]) -> int:
    """Which segment (by its place among the log's, of these sizes) begins the log's tail:
    the last one holding anything, since a segment rolled just before a crash may follow a
    torn one, empty. Damage from there on with nothing valid after it is cut off at open."""
    tail = len(sizes) - 1
    while tail > 0 and sizes[tail] == 0:
        tail -= 1
    return tail


def _recover(
    segment: FileSegment,
    last: bool,
    on_batch: BatchCallback | None,
    truncations: list[Truncation],
) -> bool:
    """Check every batch of `segment`; True if its damaged tail was cut off."""
    size = segment.path.stat().st_size
    scan = scan_batches(segment.read, size, segment.base_offset, segment, on_batch)
    if scan.damage_at is not None:
        assert scan.reason is not None
        if not last or scan.valid_after:
            raise CorruptLog(segment.path, scan.damage_at, scan.reason)
        log.warning(
            "truncating %s at byte %d (%d bytes dropped): %s",
            segment.path,
            scan.damage_at,
            size - scan.damage_at,
            scan.reason,
        )
        segment.truncate(scan.damage_at)
        truncations.append(
            Truncation(segment.path, scan.damage_at, size - scan.damage_at, scan.reason)
        )
    segment.next_offset = max(segment.next_offset, scan.next_offset)
    return scan.damage_at is not None


def _finish_interrupted_swaps(directory: Path) -> None:
    for cleaned in directory.glob("*" + CLEANED):
        cleaned.unlink()
    for swap in directory.glob("*" + SWAP):
        base, end = swap_range(swap.name)
        for path in directory.glob("*" + SUFFIX):
            other = int(path.name[: -len(SUFFIX)])
            if base < other < end:
                path.unlink()
        os.replace(swap, directory / segment_name(base))
    fsync_dir(directory)
