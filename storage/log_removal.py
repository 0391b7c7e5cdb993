"""What takes data out of a partition log, and what decides a cleaning.

The log start moving (DeleteRecords), retention dropping the oldest segments whole, and the
cleaner's swap of compacted segments for the closed ones they replace: each changes the
segment list only from its oldest end, on the event loop, under the log's lock. PartitionLog
(partition_log.py) takes these from this mixin; appending and reading stay there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from minicoord.storage.segment import FileSegment, Segment, fsync_dir, segment_name

if TYPE_CHECKING:
    from pathlib import Path


class SegmentRemoval:
    # The PartitionLog state these methods read and change (set in its __init__).
    directory: Path | None
    segments: list[Segment]
    _bases: list[int]
    log_start_offset: int
    next_offset: int
    high_watermark: int
    _hw_segment: Segment | None
    _hw_position: int
    clean_end: int
    cleaning: bool
    lock: threading.Lock

    if TYPE_CHECKING:

        @property
        def dirty(self) -> bool: ...

        @property
        def size_bytes(self) -> int: ...

        def _roll(self, base_offset: int) -> Segment: ...

    def advance_start(self, offset: int) -> list[Segment]:
        """Move the log start offset (DeleteRecords); returns the segments dropped whole."""
        if offset <= self.log_start_offset:
            return []
        self.log_start_offset = offset
        return self._drop_below_start()

    def _drop_below_start(self) -> list[Segment]:
        # As Kafka's deleteLogStartOffsetBreachedSegments: a segment goes once the next one
        # starts at or below the log start, so the active segment stays (its records below
        # the start are not read, but MAX_TIMESTAMP still finds its newest, as in Kafka).
        start = self.log_start_offset
        return self._drop_segments(lambda s: s.next_offset <= start, keep_active=True)

    def apply_retention(self, now: int, retention_ms: int, retention_bytes: int) -> list[Segment]:
        """Delete segments past `retention.ms` (by their newest timestamp, else their age:
        Segment.largest_timestamp) or beyond
        `retention.bytes` (oldest first); -1 turns either off. The log start moves with them.

        As in Kafka, the active segment goes too once all of it is expired (the log rolls a
        new, empty one), so a quiet topic's old messages do not outlive retention.ms.
        """
        dropped = self._drop_below_start()
        excess = self.size_bytes - retention_bytes if retention_bytes >= 0 else 0

        def expired(segment: Segment) -> bool:
            nonlocal excess
            if retention_bytes >= 0 and excess >= segment.size:
                excess -= segment.size
                return True
            return retention_ms >= 0 and segment.largest_timestamp() < now - retention_ms

        expired_segments = self._drop_segments(expired)
        if expired_segments:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        return dropped + expired_segments

    def _drop_segments(
        self, condition: Callable[[Segment], bool], *, keep_active: bool = False
    ) -> list[Segment]:
        """Delete segments from the oldest while `condition(segment)` holds.

        The active segment qualifies (unless `keep_active`) only when non-empty and wholly
        below the high watermark; it is rolled first, so the log always keeps an active
        segment. Nothing goes while a cleaning is in flight (`cleaning`): the next retention
        check drops it.
        """
        dropped: list[Segment] = []
        if self.cleaning:
            return dropped
        with self.lock:
            segments = list(self.segments)
        for segment in segments:
            if not condition(segment):
                break
            if segment is segments[-1]:
                if keep_active or not segment.size or self.dirty:
                    break
                if segment.next_offset > self.high_watermark:
                    break
                self._roll(self.next_offset)
                self._hw_segment, self._hw_position = self.segments[-1], 0
            dropped.append(segment)
        if not dropped:
            return dropped
        with self.lock:
            del self.segments[: len(dropped)]
            del self._bases[: len(dropped)]
        for segment in dropped:
            segment.delete()
        if self.directory is not None:
            fsync_dir(self.directory)
        return dropped

    def replace_closed(self, closed: Sequence[Segment], cleaned: Sequence[Segment]) -> None:
        """Swap the cleaned segments in for `closed`, the oldest segments (the cleaner's
        commit); each cleaned segment replaces those from its base offset to the next's.

        Runs on the event loop, like every other change to the segment list. On disk the
        cleaned bytes are already in `B-E.log.swap` files, fsync'd and indexed: from here on
        a crash leaves a log that opens to the same records (see `open`).
        """
        with self.lock:
            if self.segments[: len(closed)] != list(closed):
                raise RuntimeError(f"{self.name}: segments changed under the cleaner")
            renamed = {c.base_offset for c in cleaned if isinstance(c, FileSegment)}
            for old in closed:
                if old.base_offset in renamed:
                    old.close()  # its file is replaced by a rename below
                else:
                    old.delete()
            for segment in cleaned:
                if isinstance(segment, FileSegment):
                    final = segment.path.parent / segment_name(segment.base_offset)
                    os.replace(segment.path, final)
                    segment.rename(final)
            if self.directory is not None:
                fsync_dir(self.directory)
            self.segments[: len(closed)] = list(cleaned)
            self._bases[: len(closed)] = [c.base_offset for c in cleaned]
            self.clean_end = cleaned[-1].next_offset

    def is_clean(self, segment: Segment) -> bool:
        """Made by a cleaning (one record per key), not yet dirtied by anything after it."""
        return segment.base_offset < self.clean_end

    def cleanable(self, now: int, min_lag_ms: int = 0) -> list[Segment]:
        """The closed segments a cleaning may take: up to the first one holding a record
        younger than `min_lag_ms` (min.compaction.lag.ms; Kafka's first uncleanable offset;
        a segment whose records carry no timestamp is as old as its last write, as Kafka
        counts it). The clean segments, already compacted, always count."""
        with self.lock:
            closed = self.segments[:-1]
        if min_lag_ms <= 0:
            return closed
        for i, segment in enumerate(closed):
            if not self.is_clean(segment) and segment.largest_timestamp() > now - min_lag_ms:
                return closed[:i]
        return closed

    def dirty_ratio(self, cleanable: Sequence[Segment] | None = None) -> float:
        """Share of the `cleanable` segments' bytes (all closed ones by default) not yet
        cleaned."""
        with self.lock:
            closed = self.segments[:-1] if cleanable is None else cleanable
        closed_bytes = sum(s.size for s in closed)
        if not closed_bytes:
            return 0.0
        clean = sum(s.size for s in closed if self.is_clean(s))
        return (closed_bytes - clean) / closed_bytes

    def compaction_overdue(self, cleanable: Sequence[Segment], now: int, max_lag_ms: int) -> bool:
        """Whether a dirty record waits past `max_lag_ms` (max.compaction.lag.ms): then the
        log is cleaned whatever its dirty ratio, as Kafka's cleaner does."""
        dirty = [s for s in cleanable if not self.is_clean(s) and s.roll_timestamp >= 0]
        return bool(dirty) and now - max_lag_ms > min(s.roll_timestamp for s in dirty)
