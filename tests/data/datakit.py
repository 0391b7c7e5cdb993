"""Producer batches for the data-path tests, built as clients build them (kafka-python's
record code), and a data plane over in-memory logs driven by a manual clock."""

from __future__ import annotations

from collections.abc import Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder
from minicoord.server.config import Config
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.plane import DataPlane
from minicoord.server.topics import Topic, TopicRegistry
from minicoord.storage.log import LogManager

NOW = 1_800_000_000_000

Rec = tuple[bytes | None, bytes | None]


def batch(
    records: Sequence[Rec] = ((b"k", b"v"),),
    *,
    compression: int = 0,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    timestamp: int = NOW,
    timestamps: Sequence[int] | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
) -> bytes:
    """A v2 batch with base offset 0, as a producer sends it."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(records):
        ts = timestamps[i] if timestamps is not None else timestamp
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def records(n: int, prefix: str = "m") -> list[Rec]:
    return [(f"{prefix}{i}".encode(), f"value-{prefix}{i}".encode()) for i in range(n)]


class Plane:
    """A data plane over in-memory logs with its own clock and timers, as the broker wires it."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.now = NOW
        self.timers = TimerQueue()
        self.topics = TopicRegistry(self.config)
        self.logs = LogManager(None)
        self.data = DataPlane(self.config, self.logs, self.topics, self.timers)

    def topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Topic:
        topic, _records = self.topics.create(name, partitions, configs)
        self.data.create_logs(topic)
        return topic

    def produce(self, topic: Topic, data: bytes | None, index: int = 0, version: int = 9):  # type: ignore[no-untyped-def]
        """Append as a Produce does, then end the turn: write out and commit."""
        outcome = self.data.append(topic, index, data, self.now, version, "test")
        self.end_turn()
        return outcome

    def end_turn(self) -> list:  # type: ignore[type-arg]
        """What the broker does after each loop turn: write, commit; the woken fetches."""
        return self.data.committed(self.logs.write_out()).replies

    def advance(self, ms: int) -> list:  # type: ignore[type-arg]
        """Move the clock; the replies of timers that fired."""
        self.now += ms
        replies = []
        for callback in self.timers.pop_due(self.now):
            replies.extend(callback(self.now).replies)
        return replies
