"""A hand-written codec for OffsetCommit, the hottest write.

The generated codec builds a message object per request, topic and partition, then the
server walks them again to check nullability; this reads the same fields straight into small
slotted records and packs the answer directly. tests/protocol/test_fast_offset_commit.py
proves the encoder byte-equal to the generated one for every served version, and the decoder
field-equal to the generated one, refusing what the generated decoder plus the null checks
refuse.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any

from minicoord.protocol.headers import (
    guarded,
    read_uvarint,
    skip_tagged_fields,
    write_uvarint,
)
from minicoord.protocol.lean_dataclass import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_EPOCH = struct.Struct(">iqi")  # partition index, committed offset, leader epoch
_OFFSET = struct.Struct(">iq")
_PARTITION = struct.Struct(">ih")
FLEXIBLE_FROM = 8
TOPIC_IDS_FROM = 10
_ZERO_UUID = uuid.UUID(int=0)


# (topic name, topic id, [(partition index, error code)]) in request order
TopicErrors = tuple[str | None, uuid.UUID | None, Sequence[tuple[int, int]]]


# Answers to one-partition commits (nearly all of them), by version, topic, partition and
# error: a member commits the same few partitions over and over.
_ONE_PARTITION: dict[tuple[Any, ...], bytes] = {}


def encode_response(version: int, topics: Sequence[TopicErrors]) -> bytes:
    if len(topics) == 1 and len(topics[0][2]) == 1:
        name, topic_id, ((index, error),) = topics[0]
        return encode_one(version, name, topic_id, index, error)
    return _encode_response(version, topics)


def encode_one(
    version: int, name: str | None, topic_id: uuid.UUID | None, index: int, error: int
) -> bytes:
    """The answer to a one-partition commit: `encode_response` of one topic, one partition."""
    key = (version, name, topic_id, index, error)
    cached = _ONE_PARTITION.get(key)
    if cached is None:
        if len(_ONE_PARTITION) >= 4096:
            _ONE_PARTITION.clear()
        cached = _ONE_PARTITION[key] = _encode_response(
            version, [(name, topic_id, [(index, error)])]
        )
    return cached


def _encode_response(version: int, topics: Sequence[TopicErrors]) -> bytes:
    flexible = version >= FLEXIBLE_FROM
    parts: list[bytes] = []
    if version >= 3:
        parts.append(_I32.pack(0))  # throttle time
    parts.append(write_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, topic_id, partitions in topics:
        if version >= TOPIC_IDS_FROM:
            parts.append((topic_id or _ZERO_UUID).bytes)
        else:
            raw = (name or "").encode()
            parts.append(write_uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw)))
            parts.append(raw)
        parts.append(write_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        for index, error in partitions:
            parts.append(_PARTITION.pack(index, error))
            if flexible:
                parts.append(b"\x00")  # no tagged fields
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


class OffsetCommitDecodeError(ValueError):
    pass


@dataclass(slots=True)
class PartitionCommit:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


@dataclass(slots=True)
class TopicCommit:
    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[PartitionCommit]


@dataclass(slots=True)
class OffsetCommitFields:
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None
    topics: list[TopicCommit]
    # v2-4 only; -1 (the default, and what clients send) for the others.
    retention_time_ms: int = -1


@dataclass(slots=True)
class OneCommit:
    """A commit of one partition of one topic by name, with no metadata and no
    group.instance.id (nearly every commit): its fields flat, one object instead of three
    and two lists. `topics` gives the general layout for whatever reads it that way."""

    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    name: str
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int

    @property
    def group_instance_id(self) -> None:
        return None

    @property
    def topics(self) -> list[TopicCommit]:
        partition = PartitionCommit(
            self.partition_index, self.committed_offset, self.committed_leader_epoch, ""
        )
        return [TopicCommit(self.name, None, [partition])]


# One-partition commits read before, by all of their body but the committed offset, the
# leader epoch and the four bytes after them (what `_one_partition` read of the rest): a
# member commits the same partition in the same generation over and over, so its next commit
# is found here and only the two numbers are read. Bounded by clearing, which only forgets.
_SHAPES: dict[bytes, tuple[str, int, str, str, int]] = {}
_SHAPES_MAX = 4096
_OFFSET_EPOCH_TAIL = 16  # committed offset, leader epoch, empty metadata, three tag sections
_EMPTY_TAIL = b"\x01\x00\x00\x00"
_OFFSET_AND_EPOCH = struct.Struct(">qi")


def decode_request(body: bytes, version: int) -> OffsetCommitFields | OneCommit:
    if FLEXIBLE_FROM <= version < TOPIC_IDS_FROM:
        if type(body) is bytes:
            shape = _SHAPES.get(body[:-_OFFSET_EPOCH_TAIL])
            if shape is not None and body.endswith(_EMPTY_TAIL):
                offset, epoch = _OFFSET_AND_EPOCH.unpack_from(body, len(body) - _OFFSET_EPOCH_TAIL)
                group_id, generation, member_id, name, index = shape
                return OneCommit(group_id, generation, member_id, name, index, offset, epoch)
        try:
            common = _one_partition(body)
        except Exception:  # the general decoder decides what is refused, and why
            common = None
        if common is not None:
            if type(body) is bytes:
                if len(_SHAPES) >= _SHAPES_MAX:
                    _SHAPES.clear()
                _SHAPES[body[:-_OFFSET_EPOCH_TAIL]] = (
                    common.group_id,
                    common.generation_id_or_member_epoch,
                    common.member_id,
                    common.name,
                    common.partition_index,
                )
            return common
    return _general(body, version)


def _string(buf: bytes, pos: int, compact: bool, nullable: bool) -> tuple[str | None, int]:
    if compact:
        n = buf[pos]
        if n < 0x80:  # lengths under 127: one byte, the common case
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        length = n - 1
    else:
        (length,) = _I16.unpack_from(buf, pos)
        pos += 2
    if length < 0:
        if length == -1 and nullable:
            return None, pos
        raise OffsetCommitDecodeError("null where a string is required")
    end = pos + length
    if end > len(buf):
        raise OffsetCommitDecodeError("string runs past the end")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise OffsetCommitDecodeError("string is not UTF-8") from exc


def _count(buf: bytes, pos: int, compact: bool) -> tuple[int, int]:
    if compact:
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        raise OffsetCommitDecodeError("null where an array is required")
    return n, pos


def _one_partition(body: bytes) -> OneCommit | None:
    """v8-9 requests of the shape nearly every commit has, or None for `_decode` to read:
    short names, no group.instance.id, one topic, one partition, no metadata, no tagged
    fields. Reads the same fields as `_decode` with no branch per field."""
    n = body[0]
    if not 0 < n < 0x80:
        return None
    group_id = str(body[1:n], "utf-8")
    (generation,) = _I32.unpack_from(body, n)
    pos = n + 4
    n = body[pos]
    if not 0 < n < 0x80:
        return None
    member_id = str(body[pos + 1 : pos + n], "utf-8")
    pos += n
    # A null group.instance.id (0), then a one-topic array (2, compact counts are n + 1).
    if body[pos] != 0 or body[pos + 1] != 2:
        return None
    n = body[pos + 2]
    if not 0 < n < 0x80:
        return None
    name = str(body[pos + 3 : pos + 2 + n], "utf-8")
    pos += 2 + n
    if body[pos] != 2:  # one partition
        return None
    index, offset, epoch = _OFFSET_EPOCH.unpack_from(body, pos + 1)
    pos += 17
    # Empty metadata (1), no tagged fields on the partition, the topic and the request, and
    # nothing after them: a string that ran past the end is caught here too.
    if body[pos : pos + 4] != b"\x01\x00\x00\x00" or len(body) != pos + 4:
        return None
    return OneCommit(group_id, generation, member_id, name, index, offset, epoch)


def _decode(body: bytes, version: int) -> OffsetCommitFields:
    compact = version >= FLEXIBLE_FROM
    end = len(body)
    # Compact strings shorter than 127 bytes (one length byte) are read inline below, each
    # guarded so that anything else (a null, a long string, a length past the end) takes
    # _string, which decides it as the generated decoder does: five calls saved per commit.
    n = body[0]
    if compact and 0 < n < 0x80 and n <= end:
        group_id: str | None = str(body[1:n], "utf-8")
        pos = n
    else:
        group_id, pos = _string(body, 0, compact, False)
    (generation,) = _I32.unpack_from(body, pos)
    pos += 4
    n = body[pos]
    if compact and 0 < n < 0x80 and pos + n <= end:
        member_id: str | None = str(body[pos + 1 : pos + n], "utf-8")
        pos += n
    else:
        member_id, pos = _string(body, pos, compact, False)
    instance = None
    if version >= 7:
        if compact and body[pos] == 0:
            pos += 1  # null, as nearly every member sends it
        else:
            instance, pos = _string(body, pos, compact, True)
    retention = -1
    if version <= 4:
        (retention,) = _I64.unpack_from(body, pos)
        pos += 8
    n_topics, pos = _count(body, pos, compact)
    topics: list[TopicCommit] = []
    by_id = version >= TOPIC_IDS_FROM
    with_epoch = version >= 6
    for _ in range(n_topics):
        name = topic_id = None
        if by_id:
            stop = pos + 16
            if stop > end:
                raise OffsetCommitDecodeError("topic id runs past the end")
            raw = body[pos:stop]
            # As the generated codec reads it: the all-zero uuid is None.
            topic_id = uuid.UUID(bytes=bytes(raw)) if any(raw) else None
            pos = stop
        else:
            n = body[pos]
            if compact and 0 < n < 0x80 and pos + n <= end:
                name = str(body[pos + 1 : pos + n], "utf-8")
                pos += n
            else:
                name, pos = _string(body, pos, compact, False)
        n_parts, pos = _count(body, pos, compact)
        partitions: list[PartitionCommit] = []
        for _ in range(n_parts):
            if with_epoch:
                index, offset, epoch = _OFFSET_EPOCH.unpack_from(body, pos)
                pos += 16
            else:
                index, offset = _OFFSET.unpack_from(body, pos)
                epoch = -1
                pos += 12
            n = body[pos]
            if compact and n == 1:
                metadata: str | None = ""  # what nearly every client commits
                pos += 1
            else:
                metadata, pos = _string(body, pos, compact, True)
            if compact:
                # No tagged fields (one zero byte) is what clients send.
                pos = pos + 1 if body[pos] == 0 else skip_tagged_fields(body, pos)
            partitions.append(PartitionCommit(index, offset, epoch, metadata))
        if compact:
            pos = pos + 1 if body[pos] == 0 else skip_tagged_fields(body, pos)
        topics.append(TopicCommit(name, topic_id, partitions))
    if compact and body[pos] != 0:
        skip_tagged_fields(body, pos)
    assert group_id is not None and member_id is not None
    return OffsetCommitFields(group_id, generation, member_id, instance, topics, retention)


# The general reader as decode_request uses it: damage refused as OffsetCommitDecodeError.
_general = guarded(_decode, OffsetCommitDecodeError)
