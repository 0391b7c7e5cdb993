"""Log compaction: rewrite a log's closed segments keeping the latest value per key.

Any compacted log: `__consumer_offsets` and topics with `cleanup.policy=compact`. Each batch
keeps its identity (base offset, compression, producer id, epoch and sequence range; see
`batch.rebuild_batch`) and loses the records that a newer one with the same key in the closed
segments supersedes. Tombstones (null values) whose key has nothing newer are kept for
`delete.retention.ms` after they were written, so a reader that replays the log meanwhile
still learns of the deletion, then dropped. Records without a key cannot be compacted and are
dropped, as Kafka's cleaner does. The active segment is neither touched nor read, nor are the
segments `min.compaction.lag.ms` still protects (those holding a record younger than that).

Transactions, as Kafka's cleaner treats them: the caller passes only segments below the last
stable offset, so no open transaction's records are cleaned; records of aborted transactions
(`aborted`: producer id, first and last offset) are dropped and never supersede a committed
record of their key. A transaction marker (control batch) is kept as it is while any record
of its transaction is left, so a reader and a restart still see where that transaction ended;
once none is (its records superseded, or aborted and dropped), it goes too, as a tombstone
does, `delete.retention.ms` after it was written (Kafka counts that time from the cleaning
that first finds the marker alone). The aborted ones dropped are reported
(`PreparedClean.dropped_aborts`) for the partition's index of aborted transactions.

As Kafka's cleaner groups them (groupSegmentsBySize), the closed segments are cleaned in
groups of consecutive segments holding at most `segment.bytes` between them, one output
segment per group, which keeps the newest of its sources' modification times. So the cleaned
log keeps segments retention can still delete one by one (by size, or by age where a group
holds only old records) on a `compact,delete` topic.

The work (`prepare`) runs in a thread over the closed segments, which nothing else writes:
each group's records go to `B-E.log.cleaned`, are fsync'd and renamed to `B-E.log.swap` (its
commit point), oldest group first. The swap-in (`PartitionLog.replace_closed`) runs on the
event loop, where every other change to the segment list happens. A crash at any step leaves
a log that opens to the same records, or to older groups cleaned and newer ones not, which
holds every key's latest record (see PartitionLog.open).
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.storage.batch import (
    ATTRIBUTES_AT,
    CONTROL,
    HEADER,
    TRANSACTIONAL,
    CorruptBatch,
    parse_batch,
    rebuild_batch,
    verify_batch,
)
from minicoord.storage.control_batch import ABORT, marker_type
from minicoord.storage.log_loader import CLEANED, SWAP, swap_name
from minicoord.storage.partition_log import PartitionLog
from minicoord.storage.record_keys import record_keys
from minicoord.storage.scan import read_batches, scan_batches
from minicoord.storage.segment import FileSegment, MemorySegment, Segment, fsync_dir

if TYPE_CHECKING:
    from kafka.record.default_records import DefaultRecordBatch


@dataclass(frozen=True, slots=True)
class CleanResult:
    name: str
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    records_before: int
    records_after: int
    seconds: float


@dataclass(frozen=True, slots=True)
class PreparedClean:
    """A finished cleaning waiting to be swapped in."""

    closed: list[Segment]
    cleaned: list[Segment]
    result: CleanResult
    # The offsets of the abort markers left out: their transactions are gone from the log.
    dropped_aborts: tuple[int, ...] = ()

    def abandon(self) -> None:
        """Delete the cleaned segments (a swap that no longer matches the log)."""
        for segment in self.cleaned:
            segment.delete()


def prepare(
    plog: PartitionLog,
    now_ms: int,
    delete_retention_ms: int,
    cleanable: Sequence[Segment] | None = None,
    aborted: Sequence[tuple[int, int, int]] = (),
) -> PreparedClean | None:
    """Clean the closed segments into new ones (blocking: runs in a worker thread).

    `cleanable`: the oldest closed segments to clean (`PartitionLog.cleanable`, which leaves
    out those min.compaction.lag.ms still protects); all closed ones by default.
    """
    started = time.perf_counter()
    with plog.lock:
        segments = list(plog.segments)
    count = len(segments) - 1 if cleanable is None else len(cleanable)
    if not 0 < count < len(segments):
        return None
    closed, after_closed = segments[:count], segments[count]
    if (cleanable is not None and closed != list(cleanable)) or any(s.unwritten for s in closed):
        # Segments changed since they were chosen (retention), or (flush policy none) bytes
        # not yet in the files: next round.
        return None
    # As Kafka's cleaner does, map the newest offset of every key in the dirty section only:
    # the closed segments after those the last cleaning made (which hold one record per
    # key), not the active segment, whose records would be walked again once it closes, nor
    # those min.compaction.lag.ms protects. A record superseded only there is kept until the
    # next cleaning. This walk is most of the
    # cleaner's work, and it runs beside the event loop under one GIL. Every dirty batch is
    # verified here, once; the second pass reads the same immutable bytes.
    clean = sum(1 for segment in closed if plog.is_clean(segment))
    skip = _Transactions(aborted)
    latest: dict[bytes, int] = {}
    for segment in closed[clean:]:
        with segment.reading() as read:
            for data in read_batches(read, segment.size):
                verify_batch(data)
                if skip.kind(data) is not None:
                    continue
                for key, offset, _ts, _tombstone in record_keys(data):
                    if key is not None:
                        latest[key] = offset

    # The offsets of the dirty records that can survive, in order. A dirty batch with none of
    # them in its range (nearly every batch of a busy offsets log) is wholly superseded:
    # dropped on its header alone, its records never walked. A record of a clean segment
    # survives unless its key is in the map (a newer one came after it).
    survivors = sorted(latest.values())
    markers = _Markers(now_ms - delete_retention_ms)
    before = after = 0
    cleaned: list[Segment] = []
    groups = _group_by_size(closed, plog.segment_bytes)
    out: _Output | None = None
    try:
        for g, group in enumerate(groups):
            end = groups[g + 1][0].base_offset if g + 1 < len(groups) else after_closed.base_offset
            out = _Output(plog, group[0].base_offset, end)
            for segment in group:
                seen, kept = _copy_survivors(
                    segment,
                    out,
                    not plog.is_clean(segment),
                    survivors,
                    latest,
                    now_ms - delete_retention_ms,
                    skip,
                    markers,
                )
                before += seen
                after += kept
            segment = out.finish(max(s.last_modified() for s in group))
            out = None
            segment.next_offset = max(segment.next_offset, group[-1].next_offset)
            cleaned.append(segment)
    except BaseException:
        if out is not None:
            out.abandon()
        for segment in cleaned:
            segment.delete()
        raise
    result = CleanResult(
        plog.name,
        len(closed),
        sum(s.size for s in closed),
        sum(s.size for s in cleaned),
        before,
        after,
        time.perf_counter() - started,
    )
    return PreparedClean(closed, cleaned, result, tuple(markers.dropped_aborts))


def clean(
    plog: PartitionLog,
    now_ms: int,
    delete_retention_ms: int,
    cleanable: Sequence[Segment] | None = None,
    aborted: Sequence[tuple[int, int, int]] = (),
) -> CleanResult | None:
    """Prepare and swap in, in the calling thread (offline tools, tests)."""
    prepared = prepare(plog, now_ms, delete_retention_ms, cleanable, aborted)
    if prepared is None:
        return None
    plog.replace_closed(prepared.closed, prepared.cleaned)
    return prepared.result


def _copy_survivors(
    segment: Segment,
    out: _Output,
    dirty: bool,
    survivors: list[int],
    latest: dict[bytes, int],
    tombstones_before: int,
    skip: _Transactions,
    markers: _Markers,
) -> tuple[int, int]:
    """Write the records of `segment` that survive to `out`; (records seen, records kept)."""
    seen = kept_count = 0
    with segment.reading() as read:
        for data in read_batches(read, segment.size):
            (first, _, _, _, _, _, last_delta, _, max_ts, pid, _, _, count) = HEADER.unpack_from(
                data, 0
            )
            kind = skip.kind(data)
            if kind is not None:
                if not dirty:
                    verify_batch(data)
                seen += count
                if kind is _MARKER and markers.keep(data, first, pid, max_ts):
                    kept_count += count
                    out.write(bytes(data))
                continue
            if dirty:
                at = bisect_left(survivors, first)
                if at == len(survivors) or survivors[at] > first + last_delta:
                    seen += count
                    continue
            else:
                verify_batch(data)
            keys = record_keys(data)
            kept = [
                i
                for i, (key, offset, ts, tombstone) in enumerate(keys)
                if key is not None
                and latest.get(key, offset) == offset
                and not (tombstone and ts <= tombstones_before)
            ]
            seen += len(keys)
            if not kept:  # superseded, or its survivors were tombstones past retention
                continue
            if data[ATTRIBUTES_AT + 1] & TRANSACTIONAL:
                markers.pending.add(pid)
            kept_count += len(kept)
            if len(kept) == len(keys):
                # An untouched batch is copied as it is: no re-encoding, same bytes.
                out.write(bytes(data))
                continue
            batch = parse_batch(data)  # verified above
            records = _records(batch)
            out.write(rebuild_batch(batch, [records[i] for i in kept]))
    return seen, kept_count


_MARKER, _ABORTED = "marker", "aborted"


class _Transactions:
    """Which batches the cleaner leaves out of the key map: markers (kept as they are) and
    the batches of aborted transactions (dropped)."""

    def __init__(self, aborted: Sequence[tuple[int, int, int]]) -> None:
        self.aborted: dict[int, list[tuple[int, int]]] = {}
        for pid, first, last in aborted:
            self.aborted.setdefault(pid, []).append((first, last))

    def kind(self, data: bytes | bytearray | memoryview) -> str | None:
        # The attributes' low byte first: nearly every batch (all of __consumer_offsets) is
        # not transactional and costs one byte read.
        if not data[ATTRIBUTES_AT + 1] & TRANSACTIONAL:
            return None
        (base, *_, attributes, _last, _first_ts, _max_ts, pid, _epoch, _seq, _count) = (
            HEADER.unpack_from(data, 0)
        )
        if attributes & CONTROL:
            return _MARKER
        for first, last in self.aborted.get(pid, ()):
            if first <= base <= last:
                return _ABORTED
        return None


class _Markers:
    """Which transaction markers a cleaning keeps: those whose transaction still has a record
    in the log, and the others for `delete.retention.ms` after they were written. The
    batches are walked in offset order, and a producer's transaction is its batches since its
    previous marker."""

    def __init__(self, before: int) -> None:
        self.before = before
        # Producers with a batch kept since their last marker.
        self.pending: set[int] = set()
        self.dropped_aborts: list[int] = []

    def keep(self, data: bytes | bytearray | memoryview, offset: int, pid: int, ts: int) -> bool:
        had_records = pid in self.pending
        self.pending.discard(pid)
        if had_records or ts > self.before:
            return True
        kind = marker_type(data)
        if kind is None:
            return True  # not a marker this cleaner knows: kept as it is
        if kind == ABORT:
            self.dropped_aborts.append(offset)
        return False


def _group_by_size(segments: Sequence[Segment], max_bytes: int) -> list[list[Segment]]:
    """Consecutive segments in groups of at most `max_bytes` between them (a larger segment
    alone), as Kafka's groupSegmentsBySize groups them by `segment.bytes`."""
    groups: list[list[Segment]] = []
    size = 0
    for segment in segments:
        if groups and size + segment.size <= max_bytes:
            groups[-1].append(segment)
            size += segment.size
        else:
            groups.append([segment])
            size = segment.size
    return groups


def _records(batch: DefaultRecordBatch) -> list[Any]:
    try:
        return list(batch)
    except Exception as exc:  # a CRC-valid batch whose records do not parse
        raise CorruptBatch(f"undecodable records: {exc!r}") from exc


class _Output:
    """Where cleaned batches go: `B-E.log.cleaned` on disk, or a buffer for an in-memory log."""

    def __init__(self, plog: PartitionLog, base: int, end: int) -> None:
        self.base = base
        self.directory = plog.directory
        self.buf = bytearray()
        self.size = 0
        self.fd: int | None = None
        if self.directory is not None:
            self.path = self.directory / swap_name(base, end, CLEANED)
            self.swap = self.directory / swap_name(base, end, SWAP)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.fd is None:
            self.buf += data
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def finish(self, modified_ms: int) -> Segment:
        """The cleaned segment, modified when its newest source was (Kafka keeps the source's
        lastModified): its age for retention where its records carry no timestamp."""
        if self.fd is None:
            segment: Segment = MemorySegment(self.base, bytes(self.buf))
            scan_batches(segment.read, self.size, self.base, segment, verify=False)
            segment.untimed_at = modified_ms / 1000
            return segment
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = None
        os.utime(self.path, ns=(modified_ms * 1_000_000, modified_ms * 1_000_000))
        os.replace(self.path, self.swap)
        assert self.directory is not None
        fsync_dir(self.directory)
        segment = FileSegment(self.swap, self.base, self.size)
        with segment.reading() as read:
            scan_batches(read, self.size, self.base, segment, verify=False)
        return segment

    def abandon(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.path.unlink(missing_ok=True)
