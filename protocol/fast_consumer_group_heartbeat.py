"""A hand-written codec for ConsumerGroupHeartbeat (key 68, v0-1), the consumer protocol's
hottest request.

A member heartbeats every few hundred milliseconds, almost always with only its group, id and
epoch; the generated codec still builds message objects for request and answer and the
server walks the request again for nulls. This reads the fields into one slotted record and
packs the answer directly. tests/protocol/test_fast_consumer_group_heartbeat.py proves the
decoder field-equal to the generated one (refusing what it plus the null checks refuse) and
the encoder byte-equal, for both versions.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping

from minicoord.protocol.headers import (
    guarded,
    read_uvarint,
    skip_tagged_fields,
    write_compact_string,
    write_uvarint,
)
from minicoord.protocol.lean_dataclass import dataclass

_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ih")  # throttle time, error code
_EPOCH_INTERVAL = struct.Struct(">ii")
NULL_STRUCT = b"\xff"
PRESENT_STRUCT = b"\x01"


class ConsumerGroupHeartbeatDecodeError(ValueError):
    pass


@dataclass(slots=True)
class OwnedTopic:
    topic_id: uuid.UUID | None
    partitions: list[int]


@dataclass(slots=True)
class ConsumerGroupHeartbeatFields:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: list[OwnedTopic] | None


class SteadyHeartbeat:
    """A heartbeat that repeats nothing (the steady tail below): its group, member id and
    epoch; every other field reads as the generated codec reads it, null or -1, from the
    class. A third of the fields to set, and the handler can tell one by its type."""

    __slots__ = ("group_id", "member_epoch", "member_id")
    instance_id = None
    rack_id = None
    rebalance_timeout_ms = -1
    subscribed_topic_names = None
    subscribed_topic_regex = None
    server_assignor = None
    topic_partitions = None

    def __init__(self, group_id: str, member_id: str, member_epoch: int) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch

    def __repr__(self) -> str:
        return (
            f"SteadyHeartbeat(group_id={self.group_id!r}, member_id={self.member_id!r}, "
            f"member_epoch={self.member_epoch})"
        )


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    n = buf[pos]
    if n < 0x80:
        return n, pos + 1
    return read_uvarint(buf, pos)


def _string(buf: bytes, pos: int, nullable: bool) -> tuple[str | None, int]:
    n, pos = _uvarint(buf, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise ConsumerGroupHeartbeatDecodeError("null where a string is required")
    end = pos + n - 1
    if end > len(buf):
        raise ConsumerGroupHeartbeatDecodeError("string runs past the end")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise ConsumerGroupHeartbeatDecodeError("string is not UTF-8") from exc


def _skip_tags(buf: bytes, pos: int) -> int:
    # No tagged fields (one zero byte) is what clients send.
    return pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)


# What follows the epoch in a steady heartbeat, which repeats nothing: null instance and rack,
# rebalance timeout -1, null names, (v1+) null regex, null assignor, null partitions, no tags.
_STEADY_TAIL = (
    b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00",
    b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00",
)


# Steady heartbeats read before, per version, by their whole body: a member repeats the same
# one until its epoch moves, so nearly every one is found here and shares the fields read the
# first time (handlers never change a request). Bounded by clearing, which only forgets.
_STEADY: tuple[dict[bytes, SteadyHeartbeat], ...] = tuple({} for _ in _STEADY_TAIL)
_STEADY_MAX = 1024


def _decode(body: bytes, version: int) -> ConsumerGroupHeartbeatFields | SteadyHeartbeat:
    # Group and member ids shorter than 127 bytes (one length byte each), read inline: what
    # every client sends. Anything else (a null, a longer id) takes the general reader.
    # (An index past the end raises IndexError, refused as any read past the end is.)
    n = body[0] - 1
    if 0 <= n < 0x7F:
        m_at = n + 1
        m = body[m_at] - 1
        e_at = m_at + 1 + m
        # Most heartbeats: one comparison instead of reading seven null fields (it also
        # bounds the epoch: the tail is not empty).
        if 0 <= m < 0x7F and body[e_at + 4 :] == _STEADY_TAIL[version]:
            steady = SteadyHeartbeat(
                str(body[1:m_at], "utf-8"),
                str(body[m_at + 1 : e_at], "utf-8"),
                _I32.unpack_from(body, e_at)[0],
            )
            if type(body) is bytes:
                seen = _STEADY[version]
                if len(seen) >= _STEADY_MAX:
                    seen.clear()
                seen[body] = steady
            return steady
    group_id, pos = _string(body, 0, False)
    member_id, pos = _string(body, pos, False)
    (epoch,) = _I32.unpack_from(body, pos)
    instance, pos = _string(body, pos + 4, True)
    rack, pos = _string(body, pos, True)
    (rebalance_timeout,) = _I32.unpack_from(body, pos)
    pos += 4
    names: list[str] | None = None
    n, pos = _uvarint(body, pos)
    if n:
        names = []
        for _ in range(n - 1):
            name, pos = _string(body, pos, False)
            names.append(name)  # type: ignore[arg-type]
    regex = None
    if version >= 1:
        regex, pos = _string(body, pos, True)
    assignor, pos = _string(body, pos, True)
    owned: list[OwnedTopic] | None = None
    n, pos = _uvarint(body, pos)
    if n:
        owned = []
        for _ in range(n - 1):
            end = pos + 16
            if end > len(body):
                raise ConsumerGroupHeartbeatDecodeError("topic id runs past the end")
            raw = bytes(body[pos:end])
            # As the generated codec reads it: the all-zero uuid is None.
            topic_id = uuid.UUID(bytes=raw) if any(raw) else None
            count, pos = _uvarint(body, end)
            if count == 0:
                raise ConsumerGroupHeartbeatDecodeError("null where an array is required")
            count -= 1
            if pos + 4 * count > len(body):
                raise ConsumerGroupHeartbeatDecodeError("partitions run past the end")
            partitions = list(struct.unpack_from(f">{count}i", body, pos))
            pos = _skip_tags(body, pos + 4 * count)
            owned.append(OwnedTopic(topic_id, partitions))
    skip_tagged_fields(body, pos)
    assert group_id is not None and member_id is not None
    return ConsumerGroupHeartbeatFields(
        group_id, member_id, epoch, instance, rack, rebalance_timeout, names, regex, assignor, owned
    )


_read = guarded(_decode, ConsumerGroupHeartbeatDecodeError)


def decode_request(body: bytes, version: int) -> ConsumerGroupHeartbeatFields | SteadyHeartbeat:
    if type(body) is bytes and 0 <= version < len(_STEADY):
        steady = _STEADY[version].get(body)
        if steady is not None:
            return steady
    return _read(body, version)


# A steady answer's fixed parts: no throttle, no error, a null message; a null assignment
# (nothing changed) and no tagged fields.
_STEADY_HEAD = _HEAD.pack(0, 0) + b"\x00"
_STEADY_END = NULL_STRUCT + b"\x00"


def encode_steady_response(member_id: str, member_epoch: int, heartbeat_interval_ms: int) -> bytes:
    """`encode_response` of an error-free answer with no message and no assignment: the
    answer to nearly every heartbeat, packed with less work (the tests hold them equal)."""
    data = member_id.encode()
    n = len(data) + 1
    length = bytes((n,)) if n < 0x80 else write_uvarint(n)
    return b"".join(
        (
            _STEADY_HEAD,
            length,
            data,
            _EPOCH_INTERVAL.pack(member_epoch, heartbeat_interval_ms),
            _STEADY_END,
        )
    )


def encode_response(
    error: int,
    message: str | None,
    member_id: str | None,
    member_epoch: int,
    heartbeat_interval_ms: int,
    assignment: Mapping[uuid.UUID, Iterable[int]] | None,
) -> bytes:
    """The answer, the same bytes at v0 and v1 (v1 added no response field)."""
    parts = [
        _HEAD.pack(0, error),
        write_compact_string(message),
        write_compact_string(member_id),
        _EPOCH_INTERVAL.pack(member_epoch, heartbeat_interval_ms),
    ]
    if assignment is None:
        parts.append(NULL_STRUCT)
    else:
        topics = [(t, sorted(ps)) for t, ps in sorted(assignment.items()) if ps]
        parts.append(PRESENT_STRUCT)
        parts.append(write_uvarint(len(topics) + 1))
        for topic_id, partitions in topics:
            parts.append(topic_id.bytes)
            parts.append(write_uvarint(len(partitions) + 1))
            parts.append(struct.pack(f">{len(partitions)}i", *partitions))
            parts.append(b"\x00")
        parts.append(b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)
