"""A hand-written codec for Heartbeat, the hottest request.

kafka-python's generated codec builds a message object per request and per response; a
Heartbeat needs four fields in and one error code out. tests/protocol/test_fast_heartbeat.py
proves this codec byte-equal (encoding) and field-equal (decoding) to the generated one for
every version, and that it refuses what the generated one refuses.
"""

from __future__ import annotations

import struct

from minicoord.protocol.headers import MalformedHeader, read_uvarint, skip_tagged_fields
from minicoord.protocol.lean_dataclass import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_THROTTLE_ERROR = struct.Struct(">ih")
FLEXIBLE_FROM = 4


class HeartbeatDecodeError(ValueError):
    pass


@dataclass(slots=True)
class HeartbeatFields:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


def _string(buf: bytes, pos: int, compact: bool, nullable: bool) -> tuple[str | None, int]:
    if compact:
        if pos < len(buf) and buf[pos] < 0x80:  # a length under 127: one byte
            length = buf[pos] - 1
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
            length = n - 1
    else:
        if pos + 2 > len(buf):
            raise HeartbeatDecodeError("string length runs past the end")
        (length,) = _I16.unpack_from(buf, pos)
        pos += 2
    if length < 0:
        if length == -1 and nullable:
            return None, pos
        raise HeartbeatDecodeError("null where a string is required")
    end = pos + length
    if end > len(buf):
        raise HeartbeatDecodeError("string runs past the end")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise HeartbeatDecodeError("string is not UTF-8") from exc


# v4 heartbeats read before, by their whole body: a member sends the same heartbeat until
# its generation changes, so nearly every one is found here and shares the fields read the
# first time (handlers never change a request). Bounded by clearing, which only forgets.
_SEEN: dict[bytes, HeartbeatFields] = {}
_SEEN_MAX = 1024


def decode_request(body: bytes, version: int) -> HeartbeatFields:
    if version >= FLEXIBLE_FROM:
        seen = _SEEN.get(body) if type(body) is bytes else None
        if seen is not None:
            return seen
        try:
            common = _common(body)
        except Exception:  # `_decode` decides what is refused, and why
            common = None
        if common is not None:
            if type(body) is bytes:
                if len(_SEEN) >= _SEEN_MAX:
                    _SEEN.clear()
                _SEEN[body] = common
            return common
    try:
        return _decode(body, version)
    except MalformedHeader as exc:  # a varint running past the end
        raise HeartbeatDecodeError(str(exc)) from exc


def _common(body: bytes) -> HeartbeatFields | None:
    """A v4 heartbeat of the shape nearly every one has, or None for `_decode` to read:
    group and member ids under 127 bytes, no group.instance.id, no tagged fields."""
    n = body[0]
    if not 0 < n < 0x80:
        return None
    group_id = str(body[1:n], "utf-8")
    (generation_id,) = _I32.unpack_from(body, n)
    pos = n + 4
    n = body[pos]
    if not 0 < n < 0x80:
        return None
    member_id = str(body[pos + 1 : pos + n], "utf-8")
    pos += n
    # A null instance id and no tagged fields, then the end: a string that ran past the end
    # is caught here too.
    if body[pos : pos + 2] != b"\x00\x00" or len(body) != pos + 2:
        return None
    return HeartbeatFields(group_id, generation_id, member_id, None)


def _decode(body: bytes, version: int) -> HeartbeatFields:
    compact = version >= FLEXIBLE_FROM
    group_id, pos = _string(body, 0, compact, False)
    if pos + 4 > len(body):
        raise HeartbeatDecodeError("generation id runs past the end")
    (generation_id,) = _I32.unpack_from(body, pos)
    member_id, pos = _string(body, pos + 4, compact, False)
    instance = None
    if version >= 3:
        instance, pos = _string(body, pos, compact, True)
    if compact:
        skip_tagged_fields(body, pos)
    assert group_id is not None and member_id is not None
    return HeartbeatFields(group_id, generation_id, member_id, instance)


# Responses differ only by error code: build each once.
_RESPONSES: dict[tuple[int, int], bytes] = {}


def encode_response(version: int, error: int) -> bytes:
    cached = _RESPONSES.get((version, error))
    if cached is None:
        if version == 0:
            cached = _I16.pack(error)
        else:
            cached = _THROTTLE_ERROR.pack(0, error)
            if version >= FLEXIBLE_FROM:
                cached += b"\x00"  # no tagged fields
        _RESPONSES[(version, error)] = cached
    return cached
