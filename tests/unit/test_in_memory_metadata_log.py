"""An in-memory server's cluster metadata log holds a bounded amount, whatever came and went:
nothing replays it (no restart reads it), so only its offsets count, and those go on as before.
A CI broker started with --in-memory that creates and deletes topics all day held every record
(sweep35: 368 bytes per topic created and deleted)."""

from __future__ import annotations

from minicoord.server.broker import Broker
from minicoord.server.cluster_metadata import IN_MEMORY_METADATA_KEPT
from minicoord.server.config import Config
from minicoord.server.topics import METADATA_TOPIC


def test_topics_that_come_and_go_leave_a_bounded_log_and_offsets_that_keep_counting() -> None:
    broker = Broker(Config())
    broker.open_metadata()
    plog = broker.logs.get(METADATA_TOPIC, 0)
    assert plog is not None and plog.in_memory
    epochs = []
    for i in range(3000):
        topic = broker.create_topic(f"ci-run-{i:05d}-orders", 3, {"retention.ms": "60000"})
        broker.delete_topic(topic)
        epochs.append(broker.features_epoch())
        assert plog.size_bytes <= IN_MEMORY_METADATA_KEPT + 4096
    # Every record still has its own offset: the log's end counts all of them, and the
    # features' epoch (the log's end, as Kafka's is its image's offset) kept moving.
    assert epochs == sorted(set(epochs))
    assert plog.next_offset == plog.high_watermark == epochs[-1] > 3000 * 5
    assert plog.log_start_offset > 0
    # What the log was for is all there.
    kept = broker.create_topic("kept", 2)
    assert [t.name for t in broker.topics.user_topics()] == ["kept"]
    assert kept.partitions == 2
