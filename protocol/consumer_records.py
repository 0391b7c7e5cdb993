"""KIP-848 consumer group records in `__consumer_offsets`, in Kafka's own formats.

A key is an int16 record type (3 group epoch, 4 Kafka 4.0's subscription metadata, 5 member
metadata, 6 target assignment epoch, 7 member target assignment, 8 member current assignment,
16 resolved regular expression) then the key struct; a value is an int16 version (0) then the
flexible value struct. A null value is a tombstone. records.py dispatches keys here by type.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.api_data import ApiData
from minicoord.protocol import schemas

VALUE_VERSION = 0


class ConsumerGroupMetadataKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupMetadataValue(ApiData, load_json=schemas):
    pass


class ConsumerGroupPartitionMetadataKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupPartitionMetadataValue(ApiData, load_json=schemas):
    pass


class ConsumerGroupMemberMetadataKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupMemberMetadataValue(ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMetadataKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMetadataValue(ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMemberKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupTargetAssignmentMemberValue(ApiData, load_json=schemas):
    pass


class ConsumerGroupCurrentMemberAssignmentKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupCurrentMemberAssignmentValue(ApiData, load_json=schemas):
    pass


class ConsumerGroupRegularExpressionKey(ApiData, load_json=schemas):
    pass


class ConsumerGroupRegularExpressionValue(ApiData, load_json=schemas):
    pass


# record type -> (key class, value class)
TYPES: dict[int, tuple[Any, Any]] = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    16: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue),
}
KEY_TYPE = {key: rtype for rtype, (key, _value) in TYPES.items()}

Assignment = Mapping[uuid.UUID, Iterable[int]]


def _key(cls: Any, **fields: Any) -> bytes:
    return bytes(cls(**fields).encode(version=KEY_TYPE[cls]))


def _value(cls: Any, **fields: Any) -> bytes:
    return bytes(cls(**fields).encode(version=VALUE_VERSION))


def group_epoch_key(group: str) -> bytes:
    return _key(ConsumerGroupMetadataKey, group_id=group)


def group_epoch_value(epoch: int, metadata_hash: int) -> bytes:
    return _value(ConsumerGroupMetadataValue, epoch=epoch, metadata_hash=metadata_hash)


def partition_metadata_key(group: str) -> bytes:
    return _key(ConsumerGroupPartitionMetadataKey, group_id=group)


def member_key(group: str, member: str) -> bytes:
    return _key(ConsumerGroupMemberMetadataKey, group_id=group, member_id=member)


def member_value(
    *,
    instance_id: str | None,
    rack_id: str | None,
    client_id: str,
    client_host: str,
    topics: Iterable[str],
    regex: str,
    rebalance_timeout_ms: int,
    server_assignor: str | None,
    classic: tuple[int, Iterable[tuple[str, bytes]]] | None,
) -> bytes:
    meta = None
    if classic is not None:
        cls = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
        session, protocols = classic
        meta = cls(
            session_timeout_ms=session,
            supported_protocols=[cls.ClassicProtocol(name=n, metadata=m) for n, m in protocols],
        )
    return _value(
        ConsumerGroupMemberMetadataValue,
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        # Kafka stores the names sorted.
        subscribed_topic_names=sorted(topics),
        subscribed_topic_regex=regex or None,
        rebalance_timeout_ms=rebalance_timeout_ms,
        server_assignor=server_assignor,
        classic_member_metadata=meta,
    )


def target_epoch_key(group: str) -> bytes:
    return _key(ConsumerGroupTargetAssignmentMetadataKey, group_id=group)


def target_epoch_value(epoch: int, timestamp: int) -> bytes:
    return _value(
        ConsumerGroupTargetAssignmentMetadataValue,
        assignment_epoch=epoch,
        assignment_timestamp=timestamp,
    )


def target_key(group: str, member: str) -> bytes:
    return _key(ConsumerGroupTargetAssignmentMemberKey, group_id=group, member_id=member)


def target_value(assignment: Assignment) -> bytes:
    tp = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
    return _value(
        ConsumerGroupTargetAssignmentMemberValue,
        topic_partitions=[
            tp(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items()) if ps
        ],
    )


def current_key(group: str, member: str) -> bytes:
    return _key(ConsumerGroupCurrentMemberAssignmentKey, group_id=group, member_id=member)


def current_value(
    epoch: int, previous_epoch: int, state: int, assigned: Assignment, pending: Assignment
) -> bytes:
    tp = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions

    def topics(a: Assignment) -> list[Any]:
        return [
            tp(topic_id=t, partitions=sorted(ps), assignment_epochs=None)
            for t, ps in sorted(a.items())
            if ps
        ]

    return _value(
        ConsumerGroupCurrentMemberAssignmentValue,
        member_epoch=epoch,
        previous_member_epoch=previous_epoch,
        state=state,
        assigned_partitions=topics(assigned),
        partitions_pending_revocation=topics(pending),
    )


def regex_key(group: str, regex: str) -> bytes:
    return _key(ConsumerGroupRegularExpressionKey, group_id=group, regular_expression=regex)


def regex_value(topics: Iterable[str], version: int, timestamp: int) -> bytes:
    return _value(
        ConsumerGroupRegularExpressionValue,
        topics=sorted(topics),
        resolved_version=version,
        timestamp=timestamp,
    )


def decode_key(record_type: int, key: bytes) -> Any:
    return TYPES[record_type][0].decode(key)


def decode_value(record_type: int, value: bytes) -> Any:
    return TYPES[record_type][1].decode(value)
