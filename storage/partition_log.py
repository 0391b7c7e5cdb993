"""One topic partition's log: segments of RecordBatch v2 batches, named by base offset.

The same engine carries `__consumer_offsets` (the coordinator's records), user topics
(producers' batches) and the cluster metadata log. Rules it keeps:

- Offsets are assigned when a batch is accepted (`reserve`): its base offset is rewritten in
  place and the log end offset moves on at once, so a producer's next batch, pipelined behind
  it, is checked against it. The bytes reach the OS at the end of the event-loop turn
  (`write_out`, one write per segment for every batch of the turn) and become visible to
  consumers only when `commit` moves the high watermark past them, which the broker does once
  they are as durable as `log.flush.policy` promises. A consumer never reads what a crash
  could take back.
- Appends go to the last (active) segment only; a segment is closed when the next batch would
  take it past `segment_bytes`. Closed segments change only by the cleaner's atomic swap or
  by being deleted whole (retention, DeleteRecords).
- Opening a log (`log_loader`) verifies every batch and finishes or drops interrupted
  cleanings.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.protocol.records import Record
from minicoord.storage.batch import (
    HEADER_SIZE,
    PREFIX_SIZE,
    BatchInfo,
    StoredRecord,
    batch_info,
    check_batch,
    decode_batch,
    encode_batch,
    set_base_offset,
    set_leader_epoch,
)
from minicoord.storage.log_loader import Truncation, load_segments
from minicoord.storage.log_removal import SegmentRemoval
from minicoord.storage.scan import BatchCallback, read_batches
from minicoord.storage.segment import (
    INDEX_INTERVAL_BYTES,
    FileSegment,
    MemorySegment,
    Segment,
    fsync_dir,
)

if TYPE_CHECKING:
    # Annotations only: a server that keeps its logs in memory does without pathlib.
    from pathlib import Path

log = logging.getLogger("minicoord.storage")

# This node leads every partition in its only epoch; batches carry it, as Kafka's do.
LEADER_EPOCH = 0


@dataclass(frozen=True, slots=True)
class WriteMark:
    """How far a write reached: the high watermark a later `commit` may move to."""

    offset: int
    segment: Segment
    position: int
    # Segments written since the last mark: what an fsync must cover.
    written: tuple[Segment, ...]


class PartitionLog(SegmentRemoval):
    def __init__(
        self, directory: Path | None, name: str, segment_bytes: int, log_start_offset: int = 0
    ) -> None:
        """A log in `directory`, or in memory when it is None. Call `open` before use."""
        self.directory = directory
        self.name = name  # TOPIC-PARTITION, for log lines
        self.segment_bytes = segment_bytes
        # segment.ms (with max.compaction.lag.ms for a compacted topic): a batch that many ms
        # past the active segment's first rolls it, as Kafka rolls on append. None: by size only.
        self.segment_ms: int | None = None
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        # Told the offsets at which its owner may write state beside the log, complete up to
        # there: each roll (the new segment's base) and a clean close (the log's end). The
        # data plane writes producer snapshots at them, as Kafka does.
        self.at_boundary: Callable[[int], None] | None = None
        self.log_start_offset = log_start_offset
        self.next_offset = 0  # the log end offset
        self.high_watermark = 0
        self._hw_segment: Segment | None = None
        self._hw_position = 0
        self._unwritten: list[Segment] = []
        self.truncations: list[Truncation] = []
        # Segments with a base offset below this were made by the cleaner and hold one record
        # per key between them, so the next cleaning maps only what came after (as Kafka's
        # cleaner maps only the dirty section, from its cleaner checkpoint). Kept in memory:
        # after a restart everything counts as dirty.
        self.clean_end = -1
        # A cleaning of this log is between its segment list and its swap-in: retention and
        # DeleteRecords leave the segments alone meanwhile (Kafka never runs both at once
        # on a log), and the next retention check drops what they skipped.
        self.cleaning = False
        # Guards `segments` between the event loop and the cleaner thread.
        self.lock = threading.Lock()

    @property
    def in_memory(self) -> bool:
        return self.directory is None

    # -- opening and recovery ---------------------------------------------------------------

    def open(self, on_batch: BatchCallback | None = None) -> None:
        """Find the segments, finish or drop interrupted cleanings, and check every batch.

        Truncates a damaged tail; raises CorruptLog for damage before valid data. `on_batch`
        sees every sound batch in order (producer state is rebuilt from it).
        """
        if self.directory is None:
            self._install([MemorySegment(self.log_start_offset)])
            self.next_offset = self.log_start_offset
        else:
            loaded = load_segments(self.directory, self.log_start_offset, on_batch)
            self._install(loaded.segments)
            self.next_offset = loaded.next_offset
            self.truncations.extend(loaded.truncations)
        if self.log_start_offset < self.segments[0].base_offset:
            self.log_start_offset = self.segments[0].base_offset
        self.next_offset = max(self.next_offset, self.log_start_offset)
        active = self.segments[-1]
        self.high_watermark = self.next_offset
        self._hw_segment, self._hw_position = active, active.size

    def _install(self, segments: list[Segment]) -> None:
        self.segments = segments
        self._bases = [s.base_offset for s in segments]

    # -- appending --------------------------------------------------------------------------

    def reserve(self, batch: bytearray, info: BatchInfo) -> int:
        """Accept a validated batch: assign its offsets and queue its bytes; returns its base.

        The caller has checked the batch (`info` is its header); this rewrites only the
        fields outside its CRC.
        """
        base = self.next_offset
        set_base_offset(batch, base)
        set_leader_epoch(batch, LEADER_EPOCH)
        size = len(batch)
        active = self.segments[-1]
        if active.size and (
            active.size + size > self.segment_bytes
            or (self.segment_ms is not None and self._waited_for_roll(active, info))
        ):
            active = self._roll(base)
        position = active.size
        active.append(batch)
        if not self._unwritten or self._unwritten[-1] is not active:
            self._unwritten.append(active)
        nxt = base + info.last_offset_delta + 1
        active.note_batch(position, base, nxt, info.max_timestamp, size)
        self.next_offset = nxt
        return base

    def _waited_for_roll(self, active: Segment, info: BatchInfo) -> bool:
        """Kafka's timeWaitedForRoll past segment.ms: from the active segment's first batch
        timestamp to this batch's, or, when that first batch carried none, since the segment
        was made."""
        assert self.segment_ms is not None
        if active.roll_timestamp >= 0:
            return info.max_timestamp - active.roll_timestamp > self.segment_ms
        return (time.time() - active.created) * 1000 > self.segment_ms

    def append(self, records: Sequence[Record], timestamp: int) -> int:
        """Append the coordinator's records as one uncompressed batch; returns its base offset."""
        data = encode_batch(self.next_offset, records, timestamp)
        return self.reserve(data, batch_info(data))

    @property
    def dirty(self) -> bool:
        """Bytes accepted but not yet handed to the OS."""
        return bool(self._unwritten)

    def write_out(self) -> WriteMark:
        """Write every queued batch to the OS (one write per segment); where that reached."""
        written = tuple(self._unwritten)
        for segment in written:
            segment.write_out()
        self._unwritten = []
        active = self.segments[-1]
        return WriteMark(self.next_offset, active, active.size, written)

    def mark(self) -> WriteMark:
        """Where the log ends now, writing nothing (flush policy `none`)."""
        active = self.segments[-1]
        return WriteMark(self.next_offset, active, active.size, ())

    def flush(self) -> None:
        """Write out and fsync everything (a clean shutdown, the offline tools)."""
        self.write_out()
        for segment in self.segments:
            segment.sync()

    @staticmethod
    def sync(mark: WriteMark) -> None:
        """fsync what a write reached (blocking: run off the event loop)."""
        for segment in mark.written:
            segment.sync()

    def commit(self, mark: WriteMark) -> int:
        """Move the high watermark to a durable mark; returns the bytes newly visible."""
        if mark.offset <= self.high_watermark:
            return 0
        gained = self._bytes_between(self._hw_segment, self._hw_position, mark)
        self.high_watermark = mark.offset
        self._hw_segment, self._hw_position = mark.segment, mark.position
        return gained

    def segment_base(self, offset: int) -> int:
        """The base offset of the segment holding `offset` (at or above the log start), the
        active one for the log end offset."""
        return self._bases[bisect_right(self._bases, offset) - 1]

    @property
    def high_watermark_segment_base(self) -> int:
        """The base offset of the segment the high watermark lies in."""
        assert self._hw_segment is not None
        return self._hw_segment.base_offset

    def _bytes_between(self, segment: Segment | None, position: int, mark: WriteMark) -> int:
        if segment is mark.segment:
            return mark.position - position
        total = mark.position
        if segment is not None:
            total += segment.size - position
            with self.lock:
                inside = False
                for s in self.segments:
                    if s is mark.segment:
                        break
                    if inside:
                        total += s.size
                    inside = inside or s is segment
        return total

    def roll(self) -> None:
        """Close the active segment now (offline compaction cleans everything this way)."""
        if self.segments[-1].size:
            self._roll(self.next_offset)

    def _roll(self, base_offset: int) -> Segment:
        directory = self.directory
        segment: Segment
        if directory is None:
            segment = MemorySegment(base_offset)
        else:
            # What waits in the process (log.flush.policy=none) goes to the OS before a later
            # segment's file exists: a killed process must not leave a file past data it lost,
            # a hole below the log's end at the next start. (Kafka's roll flushes what
            # precedes the new segment.) They stay listed for the turn's mark and fsync.
            for unwritten in self._unwritten:
                unwritten.write_out()
            segment = FileSegment.create(directory, base_offset)
            fsync_dir(directory)
        with self.lock:
            self.segments.append(segment)
            self._bases.append(base_offset)
        if self.at_boundary is not None:
            self.at_boundary(base_offset)
        return segment

    # -- reading ----------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, min_one: bool = True, upto: int | None = None
    ) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes`, below the high
        watermark, from one segment (as Kafka reads). With `min_one` the first batch is
        returned even when it alone is larger than `max_bytes` (KIP-74), so a consumer can
        always make progress. An offset no batch of its segment reaches (compaction dropped
        the segment's last records) is read from the next segment on, as Kafka's LocalLog
        does: the first batch after a gap holds the next offset there is. With `upto` (a
        read_committed fetch's last stable offset) no batch at or past it is read."""
        end = self.high_watermark if upto is None else min(upto, self.high_watermark)
        if offset >= end or offset < self.log_start_offset:
            return b""
        with self.lock:
            segment = self.segments[max(bisect_right(self._bases, offset) - 1, 0)]
        while True:
            found = self._read_in(segment, offset, max_bytes, min_one, end)
            if found is not None:
                return found
            if segment is self._hw_segment:
                return b""
            with self.lock:
                i = bisect_right(self._bases, segment.base_offset)
                if i >= len(self.segments):
                    return b""
                segment = self.segments[i]

    def _read_in(
        self, segment: Segment, offset: int, max_bytes: int, min_one: bool, upto: int
    ) -> bytes | None:
        """`read` within one segment; None when no batch of it reaches `offset`."""
        end = self._hw_position if segment is self._hw_segment else segment.size
        pos = segment.index_lookup(offset)
        window = max_bytes + INDEX_INTERVAL_BYTES + HEADER_SIZE
        chunk_at, chunk = pos, segment.read(pos, min(end - pos, window))
        # Walk batch headers from the index entry to the batch that holds `offset`.
        while True:
            if pos + _LOCATE.size > end:
                return None
            if pos - chunk_at + _LOCATE.size > len(chunk):
                chunk_at, chunk = pos, segment.read(pos, min(end - pos, window))
            base, length, last_delta = _LOCATE.unpack_from(chunk, pos - chunk_at)
            if base + last_delta >= offset:
                break
            pos += PREFIX_SIZE + length
        start = pos
        taken = 0
        while pos + PREFIX_SIZE <= end:
            if pos - chunk_at + PREFIX_SIZE > len(chunk):
                if taken:
                    break
                chunk_at, chunk = pos, segment.read(pos, min(end - pos, window))
            base, length = _PREFIX.unpack_from(chunk, pos - chunk_at)
            if base >= upto:
                break
            size = PREFIX_SIZE + length
            if taken + size > max_bytes or pos + size > end:
                if taken or not min_one or pos + size > end:
                    break
                return segment.read(start, size)
            taken += size
            pos += size
        if not taken:
            return b""
        rel = start - chunk_at
        if rel >= 0 and rel + taken <= len(chunk):
            return chunk[rel : rel + taken]
        return segment.read(start, taken)

    def records(self) -> Iterator[StoredRecord]:
        """Every record, oldest first (the log must have been opened and so verified)."""
        for data in self.batches():
            yield from decode_batch(data)

    def batches(self, from_offset: int = 0) -> Iterator[memoryview]:
        """Every whole batch from the segment holding `from_offset` on, up to the log end."""
        with self.lock:
            i = max(bisect_right(self._bases, from_offset) - 1, 0)
            segments = list(self.segments[i:])
        for segment in segments:
            yield from read_batches(segment.read, segment.size)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp`, below the high
        watermark; None if there is none."""
        for data in self.batches(self.log_start_offset):
            info = batch_info(data)
            if info.base_offset >= self.high_watermark:
                return None
            if info.max_timestamp < timestamp:
                continue
            for record in check_batch(data):
                if record.offset >= self.log_start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (the earliest such
        record if several share it), or None for an empty log. As Kafka answers it, from the
        segments' cached maximum: after DeleteRecords that record may lie below the log start
        (its segment is still there), and is answered all the same."""
        best: tuple[int, int] | None = None  # (timestamp, base offset of its batch)
        with self.lock:
            segments = list(self.segments)
        for segment in segments:
            if segment.max_timestamp_offset >= 0 and (
                best is None or segment.max_timestamp > best[0]
            ):
                best = (segment.max_timestamp, segment.max_timestamp_offset)
        if best is None:
            return None
        for data in self.batches(best[1]):
            if batch_info(data).base_offset < best[1]:
                continue
            for record in check_batch(data):
                if record.timestamp == best[0]:
                    return record.offset, record.timestamp
            break
        return None

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def close(self) -> None:
        """Close the segments (a clean shutdown: the caller flushed them first)."""
        if self.at_boundary is not None and self.segments:
            self.at_boundary(self.next_offset)
            self.at_boundary = None
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        """Remove the log and its directory (DeleteTopics)."""
        with self.lock:
            segments, self.segments, self._bases = self.segments, [], []
        for segment in segments:
            segment.delete()
        if self.directory is not None:
            # Imported here: shutil loads the bz2 and lzma libraries, memory a server that
            # deletes no topic does without.
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)


# base offset, batch length, (leader epoch, magic, CRC, attributes skipped), last offset delta
_LOCATE = struct.Struct(">qi11xi")
_PREFIX = struct.Struct(">qi")
