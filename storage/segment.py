"""Segments: where a log's bytes live, on disk or in memory, with a sparse offset index.

A segment holds whole batches from its base offset on. Its bytes are written in two steps:
`append` adds a batch to the segment's unwritten tail (in process memory), `write_out` hands
the tail to the OS in one write. Reads see both, so what the log has accepted is readable
at once whatever the flush policy; the flush policy decides only when `write_out` and `sync`
run relative to the producer's acknowledgement.

`FileSegment` is `DIR/<base offset, 20 digits>.log`, as Kafka names them; `MemorySegment`
keeps the same bytes in a bytearray (`--in-memory`). Everything above this module is shared.

The index maps offsets to byte positions sparsely, one entry per `index_interval_bytes` of
data (Kafka's index.interval.bytes), so a read seeks to the nearest entry below its offset
and walks batch headers from there. It lives in memory: entries are two machine integers.
"""

from __future__ import annotations

import errno
import os
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Annotations only: a server that keeps its logs in memory does without pathlib.
    from pathlib import Path

SUFFIX = ".log"
# The most buffers one writev takes (Linux's IOV_MAX).
IOV_MAX = 1024
Reader = Callable[[int, int], bytes]
INDEX_INTERVAL_BYTES = 4096


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


class Segment:
    """What a partition log needs of its segments; subclasses say where the bytes are."""

    __slots__ = (
        "_index_offsets",
        "_index_positions",
        "_last_indexed",
        "base_offset",
        "created",
        "max_timestamp",
        "max_timestamp_offset",
        "next_offset",
        "roll_timestamp",
        "size",
        "untimed_at",
    )

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset  # one past the last record's offset
        self.size = 0  # bytes, the unwritten tail included
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        # The first batch's max timestamp: segment.ms counts from it (Kafka's
        # rollingBasedTimestamp), as max.compaction.lag.ms does (its first batch timestamp).
        self.roll_timestamp = -1
        # When the last batch without a timestamp was noted (time.time()): a memory
        # segment's age for retention while none of its records carries a timestamp.
        self.untimed_at = 0.0
        # When this segment object was made (time.time()): segment.ms counts from it while
        # the first batch carries no timestamp, as Kafka's LogSegment.created.
        self.created = time.time()
        self._index_offsets = array("q")
        self._index_positions = array("q")
        self._last_indexed = -INDEX_INTERVAL_BYTES

    # -- bookkeeping shared by both kinds ---------------------------------------------------

    def note_batch(
        self, position: int, base_offset: int, next_offset: int, max_ts: int, size: int
    ) -> None:
        """Record a batch appended (or found at open) at `position`."""
        if position - self._last_indexed >= INDEX_INTERVAL_BYTES:
            self._index_offsets.append(base_offset)
            self._index_positions.append(position)
            self._last_indexed = position
            if not position:
                self.roll_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.max_timestamp_offset = base_offset
        elif max_ts < 0:
            self.untimed_at = time.time()  # rare (no producer timestamp): off the usual path
        self.next_offset = next_offset
        self.size = position + size

    def largest_timestamp(self) -> int:
        """What retention.ms compares: the newest record timestamp, or, in a segment whose
        records carry none (-1, from a producer that sets no timestamp), when it was last
        written, as Kafka's LogSegment.largestTimestamp falls back to the file's mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified()

    def last_modified(self) -> int:
        raise NotImplementedError

    def index_lookup(self, offset: int) -> int:
        """A position at or before the batch holding `offset` (a batch boundary)."""
        i = bisect_right(self._index_offsets, offset) - 1
        return self._index_positions[i] if i >= 0 else 0

    def reset_index(self) -> None:
        self._index_offsets = array("q")
        self._index_positions = array("q")
        self._last_indexed = -INDEX_INTERVAL_BYTES
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.roll_timestamp = -1
        self.next_offset = self.base_offset
        self.size = 0

    # -- storage, per kind ------------------------------------------------------------------

    def append(self, data: bytes | bytearray) -> None:
        raise NotImplementedError

    def read(self, position: int, size: int) -> bytes:
        raise NotImplementedError

    def read_all(self) -> bytes:
        return self.read(0, self.size)

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        """A read function another thread may use while the event loop serves this segment."""
        yield self.read

    def write_out(self) -> bool:
        """Hand the unwritten tail to the OS; whether there was anything to write."""
        return False

    def sync(self) -> None:
        """fsync what `write_out` wrote. Runs off the event loop: it touches nothing else."""

    def truncate(self, position: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def delete(self) -> None:
        pass

    @property
    def unwritten(self) -> int:
        return 0


class Chunks:
    """Bytes kept as the buffers they were appended in, readable by position.

    Appending keeps the caller's buffer (no copy, no reallocation of a growing bytearray);
    a read inside one buffer is a slice of it, and a read of exactly one buffer is that
    buffer itself, which a Fetch answer then writes to the socket as it is.
    """

    __slots__ = ("bufs", "size", "starts")

    def __init__(self) -> None:
        self.bufs: list[bytes | bytearray] = []
        self.starts = array("q")
        self.size = 0

    def append(self, data: bytes | bytearray) -> None:
        if not data:
            return
        # Buffer first, then its start: a reader in another thread (the cleaner) that sees
        # the start always finds the buffer.
        self.bufs.append(data)
        self.starts.append(self.size)
        self.size += len(data)

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.size)
        if position >= end:
            return b""
        i = bisect_right(self.starts, position) - 1
        buf = self.bufs[i]
        offset = position - self.starts[i]
        if offset == 0 and end - position == len(buf):
            return buf  # type: ignore[return-value]
        if offset + end - position <= len(buf):
            return bytes(memoryview(buf)[offset : offset + end - position])
        parts = []
        pos = position
        while pos < end:
            buf = self.bufs[i]
            start = self.starts[i]
            parts.append(memoryview(buf)[pos - start : min(len(buf), end - start)])
            pos = start + len(buf)
            i += 1
        return b"".join(parts)

    def clear(self) -> None:
        self.bufs = []
        self.starts = array("q")
        self.size = 0


class MemorySegment(Segment):
    __slots__ = ("_chunks",)

    def __init__(self, base_offset: int, data: bytes = b"") -> None:
        super().__init__(base_offset)
        self._chunks = Chunks()
        self._chunks.append(data)

    def append(self, data: bytes | bytearray) -> None:
        self._chunks.append(data)

    def last_modified(self) -> int:
        # Asked only while no record here has a timestamp: then its last write is the last
        # batch without one.
        return int(self.untimed_at * 1000)

    def read(self, position: int, size: int) -> bytes:
        return self._chunks.read(position, size)

    def truncate(self, position: int) -> None:
        kept = self._chunks.read(0, position)
        self._chunks = Chunks()
        self._chunks.append(kept)

    def delete(self) -> None:
        self._chunks = Chunks()


class FileSegment(Segment):
    __slots__ = ("_fd", "_tail", "_written", "path")

    def __init__(self, path: Path, base_offset: int, written: int = 0) -> None:
        super().__init__(base_offset)
        self.path = path
        self._written = written  # bytes in the file
        self._tail = Chunks()  # appended, not yet written
        self._fd: int | None = None

    @classmethod
    def create(cls, directory: Path, base_offset: int) -> FileSegment:
        path = directory / segment_name(base_offset)
        # A fresh segment: any leftover of that name (an earlier life of a deleted topic or a
        # torn roll) is not ours.
        with open(path, "wb"):
            pass
        return cls(path, base_offset)

    def _open(self) -> int:
        fd = self._fd
        if fd is None:
            fd = self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        return fd

    def append(self, data: bytes | bytearray) -> None:
        self._tail.append(data)

    def last_modified(self) -> int:
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def write_out(self) -> bool:
        tail = self._tail
        if not tail.size:
            return False
        fd = self._open()
        # One vectored write for every batch of the turn (a short write continues).
        views = [memoryview(b) for b in tail.bufs]
        while views:
            written = os.writev(fd, views[:IOV_MAX])
            while views and written >= len(views[0]):
                written -= len(views.pop(0))
            if written:
                views[0] = views[0][written:]
        self._written += tail.size
        self._tail = Chunks()
        return True

    @property
    def unwritten(self) -> int:
        return self._tail.size

    def read(self, position: int, size: int) -> bytes:
        tail = self._tail
        end = min(position + size, self._written + tail.size)
        if position >= end:
            return b""
        if end <= self._written:
            return os.pread(self._open(), end - position, position)
        from_tail = tail.read(max(0, position - self._written), end - max(position, self._written))
        if position >= self._written:
            return from_tail
        return os.pread(self._open(), self._written - position, position) + from_tail

    def sync(self) -> None:
        fd = self._fd
        if fd is None:
            return
        try:
            os.fsync(fd)
        except OSError as exc:
            # The segment was deleted (its topic dropped) while this sync was queued.
            if exc.errno != errno.EBADF:
                raise

    def truncate(self, position: int) -> None:
        self.write_out()
        with open(self.path, "r+b") as f:
            f.truncate(position)
            f.flush()
            os.fsync(f.fileno())
        self._written = position

    def close(self) -> None:
        self.write_out()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._tail = Chunks()
        self.path.unlink(missing_ok=True)

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        # Its own descriptor: the loop's may be opened, closed or reopened meanwhile.
        fd = os.open(self.path, os.O_RDONLY)
        written = self._written

        def read(position: int, size: int) -> bytes:
            size = max(0, min(size, written - position))
            return os.pread(fd, size, position) if size else b""

        try:
            yield read
        finally:
            os.close(fd)

    def rename(self, path: Path) -> None:
        """Follow a rename of the file (the cleaner's swap), keeping the open descriptor valid."""
        self.path = path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
