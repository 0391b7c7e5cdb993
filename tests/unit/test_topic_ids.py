"""The offsets topic's id: written out in topics.py, derived from its name as it always was."""

from __future__ import annotations

import uuid

from minicoord.server.config import Config
from minicoord.server.topics import OFFSETS_TOPIC, OFFSETS_TOPIC_ID, TopicRegistry


def test_offsets_topic_id_is_derived_from_its_name() -> None:
    topic_id = uuid.uuid5(uuid.NAMESPACE_URL, "minicoord:" + OFFSETS_TOPIC)
    assert topic_id == uuid.UUID(OFFSETS_TOPIC_ID)
    registry = TopicRegistry(Config())
    assert registry.offsets.topic_id == topic_id
    # Requests find it by name or id once it exists (the first group lookup), as in Kafka.
    assert registry.get(OFFSETS_TOPIC) is None and registry.by_id(topic_id) is None
    registry.create_offsets_topic()
    assert registry.get(OFFSETS_TOPIC) is registry.by_id(topic_id) is registry.offsets


def test_cluster_ids_are_version_4_uuids_in_kafkas_text() -> None:
    import base64

    from minicoord.server.broker import new_cluster_id

    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22
        parsed = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
