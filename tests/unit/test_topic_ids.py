"""The offsets topic's id: written out in topics.py, derived from its name as it always was."""

from __future__ import annotations

import uuid

from minicoord.server.config import Config
from minicoord.server.topics import OFFSETS_TOPIC, OFFSETS_TOPIC_ID, TopicRegistry


def test_offsets_topic_id_is_derived_from_its_name() -> None:
    assert uuid.uuid5(uuid.NAMESPACE_URL, "minicoord:" + OFFSETS_TOPIC) == OFFSETS_TOPIC_ID
    offsets = TopicRegistry(Config()).get(OFFSETS_TOPIC)
    assert offsets is not None
    assert offsets.topic_id == OFFSETS_TOPIC_ID
