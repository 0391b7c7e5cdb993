"""Length-prefixed framing: each Kafka request or response is an int32 size, then its bytes."""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
# Frames at least this big are handed out as memoryviews of what was read (no copy when a
# read holds them whole); smaller ones as bytes, which the hot small-request codecs expect.
LARGE_FRAME = 64 * 1024


class FrameTooLarge(Exception):
    """A frame announced more bytes than we accept; raised before any of its body is buffered."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class NegativeFrameSize(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"negative frame size {size}")
        self.size = size


class FrameReader:
    """Accumulates bytes and hands out whole frames, one at a time.

    The size check runs when the four length bytes arrive, so an oversized request is
    refused without buffering its body. Frames are taken one by one (`next_frame`) so that a
    connection under back-pressure can leave the rest of a pipelined burst unparsed.

    What was read is kept as the chunks it arrived in: a frame inside one chunk is sliced
    out of it, and a frame spread over several is joined once, so a megabyte produce request
    is copied once on its way in, not once per read.
    """

    __slots__ = ("_chunks", "_have", "_pos", "max_size")

    def __init__(self, max_size: int) -> None:
        # A list, not a deque: it rarely holds more than one chunk. None while nothing is
        # buffered, which is nearly always (a read that is one whole frame never lands
        # here): 56 bytes less per idle connection, times every connection.
        self._chunks: list[bytes] | None = None
        self._pos = 0  # consumed bytes at the start of the first chunk
        self._have = 0  # unconsumed bytes over all chunks
        self.max_size = max_size

    def append(self, data: bytes) -> None:
        if data:
            if self._chunks is None:
                self._chunks = [data]
            else:
                self._chunks.append(data)
            self._have += len(data)

    def _size(self) -> int:
        assert self._chunks is not None  # bytes are buffered
        first, pos = self._chunks[0], self._pos
        if len(first) - pos >= 4:
            (size,) = _SIZE.unpack_from(first, pos)
        else:
            (size,) = _SIZE.unpack(self._peek(4))
        if size < 0:
            raise NegativeFrameSize(size)
        if size > self.max_size:
            raise FrameTooLarge(size, self.max_size)
        return size

    def _peek(self, n: int) -> bytes:
        out = bytearray()
        pos = self._pos
        for chunk in self._chunks or ():
            out += chunk[pos : pos + n - len(out)]
            pos = 0
            if len(out) >= n:
                break
        return bytes(out)

    def next_frame(self) -> bytes | memoryview | None:
        if self._have < 4:
            return None
        chunks = self._chunks
        assert chunks is not None  # bytes are buffered
        if not self._pos and len(chunks) == 1:
            # What nearly every read of a small request is: one chunk holding one whole
            # frame. Taken without the general path's bookkeeping.
            first = chunks[0]
            (size,) = _SIZE.unpack_from(first, 0)
            if 0 <= size < LARGE_FRAME and size <= self.max_size and size + 4 == len(first):
                self._chunks = None
                self._have = 0
                return first[4:]
        size = self._size()
        end = 4 + size
        if self._have < end:
            return None
        first, pos = chunks[0], self._pos
        if len(first) - pos >= end:
            if size >= LARGE_FRAME:
                frame: bytes | memoryview = memoryview(first)[pos + 4 : pos + end]
            else:
                frame = first[pos + 4 : pos + end]
            self._consume(end)
            return frame
        # Spread over several chunks: join exactly what the frame needs.
        parts = []
        need = end
        for chunk in chunks:
            take = chunk[pos : pos + need] if pos or len(chunk) > need else chunk
            parts.append(take)
            need -= len(take)
            pos = 0
            if not need:
                break
        joined = b"".join(parts)
        self._consume(end)
        return memoryview(joined)[4:] if size >= LARGE_FRAME else joined[4:]

    def _consume(self, n: int) -> None:
        self._have -= n
        chunks = self._chunks
        assert chunks is not None
        pos = self._pos + n
        while chunks and pos >= len(chunks[0]):
            pos -= len(chunks.pop(0))
        if chunks:
            self._pos = pos
        else:
            self._chunks = None
            self._pos = 0

    def feed(self, data: bytes) -> list[bytes | memoryview]:
        """Append data and take every whole frame it completes."""
        self.append(data)
        frames = []
        while (f := self.next_frame()) is not None:
            frames.append(f)
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received but not yet taken as frames (e.g. a half-sent request)."""
        return self._have


def whole_frame(data: bytes, max_size: int) -> bytes | None:
    """The request `data` is, if it is exactly one whole frame of at most `max_size` bytes
    and small enough to hand out as bytes; else None (and nothing is consumed)."""
    if len(data) >= 4:
        (size,) = _SIZE.unpack_from(data, 0)
        if size + 4 == len(data) and 0 <= size < LARGE_FRAME and size <= max_size:
            return data[4:]
    return None


def frame(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + payload
