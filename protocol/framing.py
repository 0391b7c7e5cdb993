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
    """Accumulates bytes and yields whole frames.

    The size check runs when the four length bytes arrive, so an oversized request is
    refused without buffering its body.
    """

    __slots__ = ("_buf", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self._max_size = max_size

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0:
                raise NegativeFrameSize(size)
            if size > self._max_size:
                raise FrameTooLarge(size, self._max_size)
            if end - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (a half-sent request)."""
        return len(self._buf)


def frame(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + payload
