"""The offsets topic's id: written out in topics.py, derived from its name as it always was."""

from __future__ import annotations

import uuid

from minicoord.server.config import Config
from minicoord.server.topics import OFFSETS_TOPIC, OFFSETS_TOPIC_ID, TopicRegistry


def test_offsets_topic_id_is_derived_from_its_name() -> None:
    assert uuid.uuid5(uuid.NAMESPACE_URL, "minicoord:" + OFFSETS_TOPIC) == OFFSETS_TOPIC_ID
    registry = TopicRegistry(Config())
    assert registry.offsets.topic_id == OFFSETS_TOPIC_ID
    # Requests find it by name or id once it exists (the first group lookup), as in Kafka.
    assert registry.get(OFFSETS_TOPIC) is None and registry.by_id(OFFSETS_TOPIC_ID) is None
    registry.create_offsets_topic()
    assert registry.get(OFFSETS_TOPIC) is registry.by_id(OFFSETS_TOPIC_ID) is registry.offsets
