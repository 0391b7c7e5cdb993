"""The `__consumer_offsets` record schemas: what the coordinator persists, in Kafka's own format.

A record key starts with an int16 version that names the record type (0/1: offset commit,
2: group metadata); the value starts with its own int16 schema version. These are the
bytes Kafka itself writes, so a log of them reads the same as Kafka's.
"""

from __future__ import annotations

import struct
from typing import Any

from minicoord.protocol import classic_records, consumer_records
from minicoord.protocol.headers import write_string
from minicoord.protocol.lean_dataclass import dataclass

# Versions minicoord writes (Kafka 3.x/4.x write the same for classic groups).
OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


# The generated record classes are in classic_records, built on first use; these names
# still find them here.
_CLASSES = frozenset(
    {"OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue"}
)


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return getattr(classic_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class Record:
    """One record to append: encoded key (None for cluster metadata records, which have
    none), and encoded value or None (a tombstone)."""

    key: bytes | None
    value: bytes | None


# Offset commits are the hot write path, so their key and value are packed by hand;
# tests/protocol/test_record_codecs.py proves them byte-equal to the generated encoders
# (`generated_offset_commit_key` / `generated_offset_commit_value`).
_H = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqih")
_VALUE_TAIL = struct.Struct(">q")


# Keys of the partitions groups commit, kept: a member commits the same few partitions over
# and over. Bounded by clearing, which only forgets the sharing. Entries outlive their group
# and topic, so the bound is what a server that sees new groups all day holds for the dead
# (at most 3.4 MB with 100-character names; 8,192 keys are 80 groups of 100 partitions).
_KEYS: dict[tuple[str, str, int], bytes] = {}
_KEYS_LIMIT = 8192
_EMPTY_METADATA_VALUE = struct.Struct(">hqihq")


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    ident = (group, topic, partition)
    key = _KEYS.get(ident)
    if key is None:
        if len(_KEYS) >= _KEYS_LIMIT:
            _KEYS.clear()
        g = group.encode()
        t = topic.encode()
        key = _KEYS[ident] = b"".join(
            (
                _H.pack(OFFSET_COMMIT_KEY_VERSION),
                _H.pack(len(g)),
                g,
                _H.pack(len(t)),
                t,
                _KEY_TAIL.pack(partition),
            )
        )
    return key


def offset_commit_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int
) -> bytes:
    if not metadata:  # what nearly every client commits
        return _EMPTY_METADATA_VALUE.pack(
            OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, 0, commit_timestamp
        )
    m = metadata.encode()
    return b"".join(
        (
            _VALUE_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, len(m)),
            m,
            _VALUE_TAIL.pack(commit_timestamp),
        )
    )


def generated_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(
        classic_records.OffsetCommitKey(group=group, topic=topic, partition=partition).encode(
            version=OFFSET_COMMIT_KEY_VERSION
        )
    )


def expiring_offset_commit_value(
    offset: int, metadata: str, commit_timestamp: int, expire_timestamp: int
) -> bytes:
    """The value of a commit that names its own expiry (OffsetCommit v2-4 with a retention
    time): version 1, the only one with the field, as Kafka's newOffsetCommitRecord writes
    it (without the leader epoch, which version 1 lacks). Rare: the generated encoder."""
    return bytes(
        classic_records.OffsetCommitValue(
            offset=offset,
            leader_epoch=-1,
            metadata=metadata,
            commit_timestamp=commit_timestamp,
            expire_timestamp=expire_timestamp,
        ).encode(version=1)
    )


def generated_offset_commit_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int
) -> bytes:
    return bytes(
        classic_records.OffsetCommitValue(
            offset=offset,
            leader_epoch=leader_epoch,
            metadata=metadata,
            commit_timestamp=commit_timestamp,
        ).encode(version=OFFSET_COMMIT_VALUE_VERSION)
    )


def group_metadata_key(group: str) -> bytes:
    return bytes(
        classic_records.GroupMetadataKey(group=group).encode(version=GROUP_METADATA_KEY_VERSION)
    )


# One classic member as the group metadata value lists it: member id, group.instance.id,
# client id, client host, rebalance timeout, session timeout, subscription, assignment.
GroupMetadataMember = tuple[str, "str | None", str, str, int, int, bytes, bytes]
_GROUP_HEAD = struct.Struct(">hh")  # value version, then the protocol type's length
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TIMEOUTS = struct.Struct(">ii")


def group_metadata_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int,
    members: list[GroupMetadataMember],
) -> bytes:
    """A classic group's metadata record value (v3), packed by hand: a rebalance of a
    thousand members writes one listing them all. tests/protocol/test_record_codecs.py proves
    it byte-equal to `generated_group_metadata_value`."""
    kind = protocol_type.encode()
    parts = [
        _GROUP_HEAD.pack(GROUP_METADATA_VALUE_VERSION, len(kind)),
        kind,
        _I32.pack(generation),
        write_string(protocol),
        write_string(leader),
        _I64.pack(current_state_timestamp),
        _I32.pack(len(members)),
    ]
    append = parts.append
    for member_id, instance_id, client_id, host, rebalance_ms, session_ms, sub, assigned in members:
        append(write_string(member_id))
        append(write_string(instance_id))
        append(write_string(client_id))
        append(write_string(host))
        append(_TIMEOUTS.pack(rebalance_ms, session_ms))
        append(_I32.pack(len(sub)))
        append(sub)
        append(_I32.pack(len(assigned)))
        append(assigned)
    return b"".join(parts)


def generated_group_metadata_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int,
    members: list[GroupMetadataMember],
) -> bytes:
    Member = classic_records.GroupMetadataValue.MemberMetadata
    return bytes(
        classic_records.GroupMetadataValue(
            protocol_type=protocol_type,
            generation=generation,
            protocol=protocol,
            leader=leader,
            current_state_timestamp=current_state_timestamp,
            members=[
                Member(
                    member_id=m[0],
                    group_instance_id=m[1],
                    client_id=m[2],
                    client_host=m[3],
                    rebalance_timeout=m[4],
                    session_timeout=m[5],
                    subscription=m[6],
                    assignment=m[7],
                )
                for m in members
            ],
        ).encode(version=GROUP_METADATA_VALUE_VERSION)
    )


def record_type(key: bytes) -> int:
    """The record type a key starts with (its "version" in Kafka's pre-4.1 terms)."""
    return int(_H.unpack_from(key, 0)[0])


class UnknownRecordType(ValueError):
    """A `__consumer_offsets` key of a type this server does not know (another version's)."""

    def __init__(self, rtype: int) -> None:
        super().__init__(f"unknown __consumer_offsets record type {rtype}")
        self.rtype = rtype


def decode_key(key: bytes) -> Any:
    """Decode a record key by its leading type, as Kafka's loader does."""
    rtype = record_type(key)
    if rtype in (0, 1):
        return classic_records.OffsetCommitKey.decode(key)
    if rtype == 2:
        return classic_records.GroupMetadataKey.decode(key)
    if rtype in consumer_records.TYPES:
        return consumer_records.decode_key(rtype, key)
    raise UnknownRecordType(rtype)


def decode_value(key: Any, value: bytes) -> Any:
    if isinstance(key, classic_records.OffsetCommitKey):
        return classic_records.OffsetCommitValue.decode(value)
    if isinstance(key, classic_records.GroupMetadataKey):
        return classic_records.GroupMetadataValue.decode(value)
    return consumer_records.decode_value(consumer_records.KEY_TYPE[type(key)], value)
