"""A hand-written encoder for OffsetCommit responses, the answer to the hottest write.

The generated codec builds a response object, a topic object and a partition object per
committed partition, then walks them; this packs the same bytes directly.
tests/protocol/test_fast_offset_commit.py proves it byte-equal to the generated encoder for
every served version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ih")
FLEXIBLE_FROM = 8
TOPIC_IDS_FROM = 10
_ZERO_UUID = uuid.UUID(int=0)

# (topic name, topic id, [(partition index, error code)]) in request order
TopicErrors = tuple[str | None, uuid.UUID | None, Sequence[tuple[int, int]]]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_response(version: int, topics: Sequence[TopicErrors]) -> bytes:
    flexible = version >= FLEXIBLE_FROM
    parts: list[bytes] = []
    if version >= 3:
        parts.append(_I32.pack(0))  # throttle time
    parts.append(_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, topic_id, partitions in topics:
        if version >= TOPIC_IDS_FROM:
            parts.append((topic_id or _ZERO_UUID).bytes)
        else:
            raw = (name or "").encode()
            parts.append(_uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw)))
            parts.append(raw)
        parts.append(_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        for index, error in partitions:
            parts.append(_PARTITION.pack(index, error))
            if flexible:
                parts.append(b"\x00")  # no tagged fields
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)
