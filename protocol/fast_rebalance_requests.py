"""Hand-written decoders for the requests of a rebalance: JoinGroup (key 11, v0-9) and
SyncGroup (key 14, v0-5).

A group of a thousand members sends two thousand JoinGroups (the first answered
MEMBER_ID_REQUIRED) and a thousand SyncGroups within a second. The generated decoder builds a
message object per request and per protocol, and the server then walks it for null checks;
these read the fields straight into small slotted records, a JoinGroup in 45-60 % of the
time and a SyncGroup in about half. tests/protocol/test_fast_rebalance_requests.py proves them
field-equal to the generated decoder for every version, refusing what it refuses with the
server's null checks.
"""

from __future__ import annotations

import struct

from minicoord.protocol.fast_rebalance import JOIN_FLEXIBLE_FROM, SYNC_FLEXIBLE_FROM
from minicoord.protocol.headers import guarded, read_uvarint, skip_tagged_fields
from minicoord.protocol.lean_dataclass import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TWO_I32 = struct.Struct(">ii")
_I32_I16 = struct.Struct(">ih")


class RebalanceDecodeError(ValueError):
    pass


@dataclass(slots=True)
class JoinGroupFields:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    # (name, metadata) pairs in the member's order of preference: the shape the coordinator
    # keeps (and shares between members) with no object per protocol.
    protocols: tuple[tuple[str, bytes], ...]
    reason: str | None


@dataclass(slots=True)
class SyncGroupFields:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    # (member id, assignment) pairs, as sent: the leader's names every member, and pairs are
    # what the coordinator's dict of assignments is made from with no object per member.
    assignments: list[tuple[str, bytes]]


# Each reader takes the body and a position and returns (value, next position). Compact
# lengths under 127 (one varint byte) are read inline: nearly every field a client sends.


def _slice(buf: bytes, pos: int, n: int) -> tuple[bytes, int]:
    end = pos + n
    if end > len(buf):
        raise RebalanceDecodeError("a field runs past the end")
    return buf[pos:end], end


def _compact_length(buf: bytes, pos: int) -> tuple[int, int]:
    """A compact field's length (-1: null) and where its data starts."""
    n = buf[pos]
    if n < 0x80:
        return n - 1, pos + 1
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def _classic_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _I16.unpack_from(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 2
        raise RebalanceDecodeError(f"string length {n}")
    raw, pos = _slice(buf, pos + 2, n)
    return str(raw, "utf-8"), pos


def _compact_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = _compact_length(buf, pos)
    if n < 0:
        return None, pos
    raw, pos = _slice(buf, pos, n)
    return str(raw, "utf-8"), pos


def _named_bytes(buf: bytes, pos: int, compact: bool) -> tuple[list[tuple[str, bytes]], int]:
    """An array of (string, bytes) entries, neither null: JoinGroup's protocols (name,
    metadata) and SyncGroup's assignments (member id, assignment)."""
    if not compact:
        return _classic_named_bytes(buf, pos)
    count, pos = _compact_length(buf, pos)
    if count < 0:
        raise RebalanceDecodeError("null where an array is required")
    entries = []
    for _ in range(count):
        name, pos = _compact_string(buf, pos)
        n, pos = _compact_length(buf, pos)
        if n < 0:
            raise RebalanceDecodeError("null where bytes are required")
        raw, pos = _slice(buf, pos, n)
        pos = _tags(buf, pos)
        entries.append((_required(name), bytes(raw)))
    return entries, pos


def _classic_named_bytes(buf: bytes, pos: int) -> tuple[list[tuple[str, bytes]], int]:
    """`_named_bytes` at a classic version, read with no call per field: a leader's
    SyncGroup names every member of the group."""
    (count,) = _I32.unpack_from(buf, pos)
    pos += 4
    if count < 0:
        raise RebalanceDecodeError("null where an array is required")
    unpack_i16 = _I16.unpack_from
    unpack_i32 = _I32.unpack_from
    size = len(buf)
    entries = []
    for _ in range(count):
        (n,) = unpack_i16(buf, pos)
        pos += 2
        end = pos + n
        if n < 0 or end > size:
            raise RebalanceDecodeError(f"string length {n} at {pos - 2} of {size}")
        name = str(buf[pos:end], "utf-8")
        (n,) = unpack_i32(buf, end)
        pos = end + 4
        end = pos + n
        if n < 0 or end > size:
            raise RebalanceDecodeError(f"bytes length {n} at {pos - 4} of {size}")
        entries.append((name, bytes(buf[pos:end])))
        pos = end
    return entries, pos


def _required(value: str | None) -> str:
    if value is None:
        raise RebalanceDecodeError("null where a string is required")
    return value


def _tags(buf: bytes, pos: int) -> int:
    return pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)


# First JoinGroups (no member id yet) read before, by version and whole body: a crowd of new
# members sends the same bytes, each to be answered MEMBER_ID_REQUIRED, and shares the fields
# read the first time (handlers never change a request). Each then rejoins with the same
# bytes but for the member id it was given, and is read as that first join with its id
# (`_known_rejoin`). Bounded by clearing, which only forgets, and by size: a first join of
# more than 4 KiB (a subscription of hundreds of topics) is read each time rather than kept,
# so that the table never holds more than about a megabyte, whoever fills it.
_FIRST_JOINS: dict[tuple[int, bytes], JoinGroupFields] = {}
_FIRST_JOINS_MAX = 128
_FIRST_JOIN_MAX_BYTES = 4096


def decode_join_request(body: bytes, version: int) -> JoinGroupFields:
    key = (version, body)
    seen = _FIRST_JOINS.get(key)
    if seen is not None:
        return seen
    if _FIRST_JOINS and type(body) is bytes:
        known = _known_rejoin(body, version)
        if known is not None:
            return known
    common = _common_join_guarded(body, version)
    if common is None:
        return _join_request_guarded(body, version)
    if not common.member_id and type(body) is bytes and len(body) <= _FIRST_JOIN_MAX_BYTES:
        if len(_FIRST_JOINS) >= _FIRST_JOINS_MAX:
            _FIRST_JOINS.clear()
        _FIRST_JOINS[key] = common
    return common


def _known_rejoin(buf: bytes, version: int) -> JoinGroupFields | None:
    """A JoinGroup that is a first join read before but for a member id (under 127 bytes)
    in place of the empty one: that join's fields with this id. None for anything else,
    damage included, which the readers then judge. The bytes before and after the id are
    the first join's, so they read as they did."""
    try:
        if version >= JOIN_FLEXIBLE_FROM:
            if not 0 < buf[0] < 0x80:  # a group id the first join's reader would not take
                return None
            at = buf[0] + 8  # past the group id (length + 1, then the text) and timeouts
            n = buf[at] - 1
            if not 0 < n < 0x7F:
                return None
            start = at + 1
            empty = b"\x01"
        else:
            (n,) = _I16.unpack_from(buf, 0)
            if n < 0:
                return None
            at = 2 + n + (8 if version >= 1 else 4)
            (n,) = _I16.unpack_from(buf, at)
            start = at + 2
            empty = b"\x00\x00"
        end = start + n
        if n <= 0 or end > len(buf):
            return None
        first = _FIRST_JOINS.get((version, buf[:at] + empty + buf[end:]))
        if first is None:
            return None
        member_id = str(buf[start:end], "utf-8")
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return JoinGroupFields(
        first.group_id,
        first.session_timeout_ms,
        first.rebalance_timeout_ms,
        member_id,
        None,
        first.protocol_type,
        first.protocols,
        first.reason,
    )


def decode_sync_request(body: bytes, version: int) -> SyncGroupFields:
    return _sync_request_guarded(body, version)


def _common_join(buf: bytes, version: int) -> JoinGroupFields | None:
    """A JoinGroup as nearly every client sends it, read with no call per field: every
    string shorter than 127 bytes (classic versions: 32,767), no group.instance.id, no
    tagged fields, nothing after the end. None for `_join_request` to read anything else;
    a field that runs past the end shows as the final length check failing."""
    compact = version >= JOIN_FLEXIBLE_FROM
    unpack_i16 = _I16.unpack_from
    fields: list[str] = []
    pos = 0
    for i in range(3):  # group id, [timeouts], member id, [group.instance.id], protocol type
        if compact:
            n = buf[pos] - 1
            if not 0 <= n < 0x7F:
                return None
            pos += 1
        else:
            (n,) = unpack_i16(buf, pos)
            if n < 0:
                return None
            pos += 2
        fields.append(str(buf[pos : pos + n], "utf-8"))
        pos += n
        if i == 0:
            if version >= 1:
                session_timeout, rebalance_timeout = _TWO_I32.unpack_from(buf, pos)
                pos += 8
            else:
                (session_timeout,) = _I32.unpack_from(buf, pos)
                rebalance_timeout = -1
                pos += 4
        elif i == 1 and version >= 5:
            if buf[pos : pos + (1 if compact else 2)] != (b"\x00" if compact else b"\xff\xff"):
                return None  # a group.instance.id: the general reader takes it
            pos += 1 if compact else 2
    if compact:
        count = buf[pos] - 1
        if not 0 <= count < 0x7F:
            return None
        pos += 1
    else:
        (count,) = _I32.unpack_from(buf, pos)
        if count < 0:
            return None
        pos += 4
    protocols = []
    for _ in range(count):
        if compact:
            n = buf[pos] - 1
            if not 0 <= n < 0x7F:
                return None
            pos += 1
        else:
            (n,) = unpack_i16(buf, pos)
            if n < 0:
                return None
            pos += 2
        name = str(buf[pos : pos + n], "utf-8")
        pos += n
        if compact:
            n, pos = _compact_length(buf, pos)
        else:
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
        if n < 0:
            return None
        metadata = bytes(buf[pos : pos + n])
        pos += n
        if compact:
            if buf[pos] != 0:
                return None  # tagged fields
            pos += 1
        protocols.append((name, metadata))
    reason = None
    if version >= 8:  # compact: why the member (re)joins, as the Java client says
        n = buf[pos] - 1
        if n >= 0x7F:
            return None
        if n >= 0:
            reason = str(buf[pos + 1 : pos + 1 + n], "utf-8")
        pos += 1 + max(n, 0)
    if compact:
        if buf[pos] != 0:
            return None
        pos += 1
    if pos != len(buf):
        return None
    group_id, member_id, protocol_type = fields
    return JoinGroupFields(
        group_id,
        session_timeout,
        rebalance_timeout,
        member_id,
        None,
        protocol_type,
        tuple(protocols),
        reason,
    )


def _join_request(buf: bytes, version: int) -> JoinGroupFields:
    compact = version >= JOIN_FLEXIBLE_FROM
    string = _compact_string if compact else _classic_string
    group_id, pos = string(buf, 0)
    if version >= 1:
        session_timeout, rebalance_timeout = _TWO_I32.unpack_from(buf, pos)
        pos += 8
    else:
        (session_timeout,) = _I32.unpack_from(buf, pos)
        rebalance_timeout = -1
        pos += 4
    member_id, pos = string(buf, pos)
    instance_id = None
    if version >= 5:
        instance_id, pos = string(buf, pos)
    protocol_type, pos = string(buf, pos)
    entries, pos = _named_bytes(buf, pos, compact)
    protocols = tuple(entries)
    reason = None
    if version >= 8:
        reason, pos = string(buf, pos)
    if compact:
        _tags(buf, pos)
    return JoinGroupFields(
        _required(group_id),
        session_timeout,
        rebalance_timeout,
        _required(member_id),
        instance_id,
        _required(protocol_type),
        protocols,
        reason,
    )


def _sync_request(buf: bytes, version: int) -> SyncGroupFields:
    if version < SYNC_FLEXIBLE_FROM:
        return _classic_sync_request(buf, version)
    string = _compact_string
    group_id, pos = string(buf, 0)
    (generation_id,) = _I32.unpack_from(buf, pos)
    member_id, pos = string(buf, pos + 4)
    instance_id, pos = string(buf, pos)  # v3+, as every flexible version is
    protocol_type = protocol_name = None
    if version >= 5:
        protocol_type, pos = string(buf, pos)
        protocol_name, pos = string(buf, pos)
    assignments, pos = _named_bytes(buf, pos, True)
    _tags(buf, pos)
    return SyncGroupFields(
        _required(group_id),
        generation_id,
        _required(member_id),
        instance_id,
        protocol_type,
        protocol_name,
        assignments,
    )


def _classic_sync_request(buf: bytes, version: int) -> SyncGroupFields:
    """`_sync_request` at a classic version (librdkafka's v3 among them), read with no call
    per field: every member of a group sends one when the join phase ends."""
    unpack_i16 = _I16.unpack_from
    size = len(buf)
    (n,) = unpack_i16(buf, 0)
    end = 2 + n
    if n < 0 or end > size:
        raise RebalanceDecodeError(f"group id length {n} of {size}")
    group_id = str(buf[2:end], "utf-8")
    generation_id, n = _I32_I16.unpack_from(buf, end)
    pos = end + 6
    end = pos + n
    if n < 0 or end > size:
        raise RebalanceDecodeError(f"member id length {n} at {pos - 2} of {size}")
    member_id = str(buf[pos:end], "utf-8")
    pos = end
    instance_id = None
    if version >= 3:
        (n,) = unpack_i16(buf, pos)
        pos += 2
        if n != -1:
            end = pos + n
            if n < 0 or end > size:
                raise RebalanceDecodeError(f"group.instance.id length {n} at {pos - 2}")
            instance_id = str(buf[pos:end], "utf-8")
            pos = end
    assignments, pos = _classic_named_bytes(buf, pos)
    return SyncGroupFields(group_id, generation_id, member_id, instance_id, None, None, assignments)


# The decoders as callers see them: damage of every kind refused as RebalanceDecodeError.
_common_join_guarded = guarded(_common_join, RebalanceDecodeError)
_join_request_guarded = guarded(_join_request, RebalanceDecodeError)
_sync_request_guarded = guarded(_sync_request, RebalanceDecodeError)
