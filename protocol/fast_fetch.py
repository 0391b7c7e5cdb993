"""A hand-written encoder for Fetch responses, the answers that carry the data.

The generated codec copies every partition's records into its buffer and then again into
the frame; this returns the response as a list of buffers whose record sets are the very
bytes read from the log, for the connection to write with one vectored write.
tests/protocol/test_fast_fetch.py proves the joined buffers byte-equal to the generated
encoder for every served version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from minicoord.protocol.headers import write_uvarint
from minicoord.protocol.lean_dataclass import dataclass

FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13
_ZERO_UUID = uuid.UUID(int=0)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_THROTTLE = struct.Struct(">i")
_THROTTLE_ERROR_SESSION = struct.Struct(">ihi")
_PARTITION_V4 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qq")


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class FetchedPartition:
    index: int
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # None: null (read_uncommitted); else (producer id, first offset) pairs.
    aborted: Sequence[tuple[int, int]] | None
    records: bytes


# (topic name, topic id, partitions) in request order
FetchedTopic = tuple[str | None, uuid.UUID | None, Sequence[FetchedPartition]]


def encode_response(
    version: int, error: int, session_id: int, topics: Sequence[FetchedTopic]
) -> list[bytes]:
    """The response body (no header) as buffers to write in order."""
    flexible = version >= FLEXIBLE_FROM
    parts: list[bytes] = []
    head = bytearray()
    if version >= 7:
        head += _THROTTLE_ERROR_SESSION.pack(0, error, session_id)
    else:
        head += _THROTTLE.pack(0)
    head += write_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for name, topic_id, partitions in topics:
        if version >= TOPIC_IDS_FROM:
            head += (topic_id or _ZERO_UUID).bytes
        else:
            raw = (name or "").encode()
            head += write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))
            head += raw
        head += write_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if version >= 5:
                head += _PARTITION_V5.pack(
                    p.index, p.error, p.high_watermark, p.last_stable_offset, p.log_start_offset
                )
            else:
                head += _PARTITION_V4.pack(p.index, p.error, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted
            if aborted is None:
                head += b"\x00" if flexible else _I32.pack(-1)
            else:
                head += write_uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    head += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += _I32.pack(-1)  # preferred read replica: none
            records = p.records
            head += write_uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
            if len(records) > 256:
                parts.append(bytes(head))
                parts.append(records)
                head = bytearray()
            else:
                head += records
            if flexible:
                head += b"\x00"  # no tagged fields (no diverging epoch, leader or snapshot)
        if flexible:
            head += b"\x00"
    if flexible:
        head += b"\x00"  # no node endpoints: the leader of every partition is this node
    parts.append(bytes(head))
    return parts
