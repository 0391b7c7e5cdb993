"""Request header v1/v2 parsing and response header v0/v1 encoding.

The header is parsed by hand rather than through a generated class because its version is
only known after reading the API key and version it carries: header v2 (tagged fields) goes
with the flexible versions of each request. client_id stays a classic int16-length string
even in v2, a Kafka quirk clients rely on.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from minicoord.protocol.lean_dataclass import dataclass

_FIXED = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")


class MalformedHeader(Exception):
    pass


T = TypeVar("T")


def guarded(
    decode: Callable[[bytes, int], T], error: Callable[[str], Exception]
) -> Callable[[bytes, int], T]:
    """A hand-written body decoder whose every way of meeting damage (a read past the end,
    a varint that runs on, bad UTF-8) is refused as `error`: the one exception its callers
    and its tests expect. No extra call on the way: the wrapper is the decoder."""

    def decoded(body: bytes, version: int) -> T:
        try:
            return decode(body, version)
        except (MalformedHeader, struct.error, IndexError) as exc:  # a read past the end
            raise error(str(exc)) from exc
        except UnicodeDecodeError as exc:
            raise error("string is not UTF-8") from exc

    return decoded


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the v1 part of a request header; returns it and the offset just past it.

    Tagged fields (header v2) are skipped separately with `skip_tagged_fields`, once the
    caller knows whether this API version is flexible.
    """
    if len(frame) < _FIXED.size:
        raise MalformedHeader(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    pos = _FIXED.size
    client_id: str | None = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise MalformedHeader("client_id runs past the end of the request")
        try:
            client_id = str(frame[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedHeader("client_id is not UTF-8") from exc
        pos = end
    elif client_len != -1:
        raise MalformedHeader(f"client_id length {client_len}")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedHeader("varint runs past the end of the request")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedHeader("varint longer than 5 bytes")


_SMALL_UVARINTS = [bytes((i,)) for i in range(0x80)]


def write_uvarint(n: int) -> bytes:
    """An unsigned varint: compact lengths and counts, record frames, zig-zagged fields."""
    if n < 0x80:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_I16 = struct.Struct(">h")
_NULL_LEGACY = _I16.pack(-1)


def write_string(text: str | None) -> bytes:
    """A classic int16-length string (None: length -1), as the hand-packed encoders write."""
    if text is None:
        return _NULL_LEGACY
    data = text.encode()
    return _I16.pack(len(data)) + data


def write_compact_string(text: str | None) -> bytes:
    """A compact string of the flexible versions: its length + 1 as a varint (None: 0)."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return write_uvarint(len(data) + 1) + data


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    if pos < len(buf) and buf[pos] == 0:
        return pos + 1  # no tagged fields: what nearly every request carries
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedHeader("tagged field runs past the end of the request")
    return pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Header v1 (flexible: one empty tagged-field section) or v0."""
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if flexible else head
