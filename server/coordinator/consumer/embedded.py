"""The consumer protocol embedded in a classic member's bytes: its JoinGroup subscription
read, its SyncGroup assignment written. What a classic member of a consumer group, or a
classic group being upgraded, is known by.
"""

from __future__ import annotations

from typing import Any

from minicoord.server.coordinator.consumer import targets
from minicoord.server.coordinator.consumer.group import Assignment, ConsumerMember


def parse_subscription(metadata: bytes) -> Any:
    # kafka-python's consumer protocol classes are imported where used (here and below): they
    # are built from JSON on import, a good share of a server's start-up, for mixed groups only.
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    return ConsumerProtocolSubscription.decode(metadata)


def names_to_ids(
    pairs: Any, topics: targets.TopicsView
) -> Assignment:  # (topic, partitions) pairs from the embedded protocol
    out: Assignment = {}
    for entry in pairs or ():
        topic = topics.get(entry.topic)
        if topic is not None:
            out[topic.topic_id] = frozenset(
                out.get(topic.topic_id, frozenset()) | set(entry.partitions)
            )
    return out


def assignment_bytes(
    member: ConsumerMember, assigned: Assignment, topics: targets.TopicsView
) -> bytes:
    """A classic member's assignment in the embedded consumer protocol, by topic name, at
    the version of its own subscription (0-3)."""
    version = 0
    if member.classic is not None and member.classic.protocols:
        metadata = member.classic.protocols[0][1]
        if len(metadata) >= 2:
            version = max(0, min(3, int.from_bytes(metadata[:2], "big", signed=True)))
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    tp = ConsumerProtocolAssignment.TopicPartition
    parts = []
    for topic_id, partitions in sorted(assigned.items()):
        topic = topics.by_id(topic_id)
        if topic is not None and partitions:
            parts.append(tp(topic=topic.name, partitions=sorted(partitions)))
    return bytes(
        ConsumerProtocolAssignment(assigned_partitions=parts, user_data=None).encode(
            version=version
        )
    )
