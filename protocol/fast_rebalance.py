"""Hand-written encoders for the answers of a rebalance: JoinGroup (key 11, v0-9),
SyncGroup (key 14, v0-5) and LeaveGroup (key 13, v0-5).

A group of a thousand members gets a thousand JoinGroup answers at once when its join phase
completes (and as many MEMBER_ID_REQUIRED answers before it), the leader's listing every
member, then a thousand SyncGroup answers when the leader's assignment arrives, and a
thousand LeaveGroup answers when it shuts down. The generated encoder builds a message object
per answer and per member; these pack the fields directly, for about a tenth of the cost.
tests/protocol/test_fast_rebalance.py proves them byte-equal to the generated encoders for
every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Protocol

from minicoord.protocol.headers import write_compact_string, write_string, write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_THROTTLE_ERROR = struct.Struct(">ih")
_ERROR_GENERATION = struct.Struct(">hi")
_THROTTLE_ERROR_GENERATION = struct.Struct(">ihi")
JOIN_FLEXIBLE_FROM = 6
SYNC_FLEXIBLE_FROM = 4
LEAVE_FLEXIBLE_FROM = 4
LEAVE_MEMBERS_FROM = 3


class JoinMember(Protocol):
    """A member as the leader's answer lists it (the coordinator's JoinMember)."""

    @property
    def member_id(self) -> str: ...

    @property
    def group_instance_id(self) -> str | None: ...

    @property
    def metadata(self) -> bytes: ...


# The part of a JoinGroup answer before the member id, by everything it is made of: every
# MEMBER_ID_REQUIRED answer of a crowd shares one, and so does every follower's answer of a
# generation, so a thousand answers pack it once. Bounded by clearing, which only forgets.
_JOIN_HEADS: dict[tuple[object, ...], bytes] = {}
_JOIN_HEADS_MAX = 256


def encode_join_response(
    version: int,
    error: int,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip_assignment: bool,
    member_id: str,
    members: Sequence[JoinMember],
) -> bytes:
    """The response body. `protocol_name` must not be None below v7, where it is not
    nullable (the handler answers "" there, as Kafka does)."""
    flexible = version >= JOIN_FLEXIBLE_FROM
    string = write_compact_string if flexible else write_string
    key = (version, error, generation_id, protocol_type, protocol_name, leader, skip_assignment)
    head = _JOIN_HEADS.get(key)
    if head is None:
        head = _join_head(
            version, error, generation_id, protocol_type, protocol_name, leader, skip_assignment
        )
        if len(_JOIN_HEADS) >= _JOIN_HEADS_MAX:
            _JOIN_HEADS.clear()
        _JOIN_HEADS[key] = head
    if not members:  # every answer but the leader's
        return head + string(member_id) + (b"\x01\x00" if flexible else b"\x00\x00\x00\x00")
    parts = [head, string(member_id)]
    with_instance = version >= 5
    if flexible:
        parts.append(write_uvarint(len(members) + 1))
        for m in members:
            metadata = m.metadata
            parts.append(write_compact_string(m.member_id))
            if with_instance:
                parts.append(write_compact_string(m.group_instance_id))
            parts.append(write_uvarint(len(metadata) + 1))
            parts.append(metadata)
            parts.append(b"\x00")  # the member's tagged fields: none
        parts.append(b"\x00")  # the response's tagged fields: none
    else:
        parts.append(_I32.pack(len(members)))
        for m in members:
            metadata = m.metadata
            parts.append(write_string(m.member_id))
            if with_instance:
                parts.append(write_string(m.group_instance_id))
            parts.append(_I32.pack(len(metadata)))
            parts.append(metadata)
    return b"".join(parts)


def _join_head(
    version: int,
    error: int,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip_assignment: bool,
) -> bytes:
    string = write_compact_string if version >= JOIN_FLEXIBLE_FROM else write_string
    if version >= 2:
        parts = [_THROTTLE_ERROR_GENERATION.pack(0, error, generation_id)]
    else:
        parts = [_ERROR_GENERATION.pack(error, generation_id)]
    if version >= 7:
        parts.append(string(protocol_type))
    if protocol_name is None and version < 7:
        raise ValueError("protocol_name is not nullable before v7")
    parts.append(string(protocol_name))
    parts.append(string(leader))
    if version >= 9:
        parts.append(b"\x01" if skip_assignment else b"\x00")
    return b"".join(parts)


def encode_sync_response(
    version: int,
    error: int,
    protocol_type: str | None,
    protocol_name: str | None,
    assignment: bytes,
) -> bytes:
    """The response body (the protocol type and name are answered from v5)."""
    head = _THROTTLE_ERROR.pack(0, error) if version >= 1 else _I16.pack(error)
    if version < SYNC_FLEXIBLE_FROM:
        return head + _I32.pack(len(assignment)) + assignment
    parts = [head]
    if version >= 5:
        parts.append(write_compact_string(protocol_type))
        parts.append(write_compact_string(protocol_name))
    parts.append(write_uvarint(len(assignment) + 1))
    parts.append(assignment)
    parts.append(b"\x00")  # no tagged fields
    return b"".join(parts)


def encode_leave_response(
    version: int, error: int, members: Sequence[tuple[str, str | None, int]]
) -> bytes:
    """The response body; `members` (member id, group.instance.id, error) are answered
    from v3, where a request names a batch."""
    head = _THROTTLE_ERROR.pack(0, error) if version >= 1 else _I16.pack(error)
    if version < LEAVE_MEMBERS_FROM:
        return head
    flexible = version >= LEAVE_FLEXIBLE_FROM
    string = write_compact_string if flexible else write_string
    parts = [head, write_uvarint(len(members) + 1) if flexible else _I32.pack(len(members))]
    for member_id, instance_id, member_error in members:
        parts.append(string(member_id))
        parts.append(string(instance_id))
        parts.append(_I16.pack(member_error))
        if flexible:
            parts.append(b"\x00")  # no tagged fields
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)
