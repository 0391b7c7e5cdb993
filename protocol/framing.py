"""Length-prefixed framing: each Kafka request or response is an int32 size, then its bytes."""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


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
    """

    __slots__ = ("_buf", "_max_size", "_pos")

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of the first unconsumed byte; compacted lazily
        self._max_size = max_size

    def append(self, data: bytes) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_frame(self) -> bytes | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0:
            raise NegativeFrameSize(size)
        if size > self._max_size:
            raise FrameTooLarge(size, self._max_size)
        end = pos + 4 + size
        if end > len(buf):
            if pos:  # make room: drop consumed bytes before waiting for the rest
                del buf[:pos]
                self._pos = 0
            return None
        self._pos = end
        return bytes(buf[pos + 4 : end])

    def feed(self, data: bytes) -> list[bytes]:
        """Append data and take every whole frame it completes."""
        self.append(data)
        frames = []
        while (f := self.next_frame()) is not None:
            frames.append(f)
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received but not yet taken as frames (e.g. a half-sent request)."""
        return len(self._buf) - self._pos


def frame(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + payload
