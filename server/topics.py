"""The topics this single-node cluster knows: names, partition counts and topic ids.

There is no data path yet, so a topic is only its name, partition count and id; this node
leads every partition.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from minicoord.protocol.errors import ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249


@dataclass(slots=True)
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    internal: bool = False


def topic_name_error(name: str | None) -> str | None:
    """Why a name is not a legal Kafka topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    return None


class TopicRegistry:
    def __init__(self, offsets_partitions: int) -> None:
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        # Like Kafka, the offsets topic is listed (as internal) so admin tools see it.
        self._add(Topic(OFFSETS_TOPIC, offsets_partitions, internal=True))

    def _add(self, topic: Topic) -> Topic:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        return topic

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def check_new(self, name: str, partitions: int) -> tuple[ErrorCode, str | None]:
        reason = topic_name_error(name)
        if reason is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        if name in self._by_name:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
        if partitions < 1:
            return ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1"
        return ErrorCode.NONE, None

    def create(self, name: str, partitions: int) -> Topic:
        error, reason = self.check_new(name, partitions)
        if error is not ErrorCode.NONE:
            raise ValueError(reason)
        return self._add(Topic(name, partitions))
