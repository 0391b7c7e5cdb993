"""DescribeLogDirs through kafka-python's admin client: the data directory, and each
partition's bytes as its segment files hold them, before and after a restart (when the
partitions are read from their files until they are loaded)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaProducer

TOPIC = "sized"


def log_dirs(bootstrap: str, **kwargs: Any) -> list[dict[str, Any]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="log-dirs")
    try:
        (broker,) = admin.describe_log_dirs(**kwargs)
        return broker["log_dirs"]
    finally:
        admin.close()


def sizes(entry: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["name"], p["partition_index"]): p["partition_size"]
        for t in entry["topics"]
        for p in t["partitions"]
    }


def on_disk(data_dir: Path, partition: int) -> int:
    folder = data_dir / f"{TOPIC}-{partition}"
    return sum(f.stat().st_size for f in folder.glob("*.log"))


def test_log_dirs_name_the_data_dir_and_each_partitions_bytes(node_factory: Any) -> None:
    node = node_factory(topics=[(TOPIC, 3)])
    node.start()
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all")
    for i in range(200):
        producer.send(TOPIC, os.urandom(100), partition=i % 2)
    producer.flush(timeout=20)
    producer.close()

    (entry,) = log_dirs(node.bootstrap)
    assert entry["error_code"] == 0
    assert Path(entry["log_dir"]) == node.data_dir.resolve()
    assert 0 < entry["usable_bytes"] <= entry["total_bytes"]
    before = sizes(entry)
    # Every partition; 100 records of 100 bytes and more each. No group was used, so, as in
    # Kafka, `__consumer_offsets` does not exist yet.
    assert {name for name, _ in before} == {TOPIC}
    assert [before[(TOPIC, p)] for p in range(3)] == [on_disk(node.data_dir, p) for p in range(3)]
    assert before[(TOPIC, 0)] > 100 * 100 and before[(TOPIC, 2)] == 0

    node.stop()
    node.start()
    asked = log_dirs(node.bootstrap, topic_partitions={TOPIC: [1, 7], "absent": [0]})
    # What exists of what was asked: partition 7 and the unknown topic are left out.
    assert sizes(asked[0]) == {(TOPIC, 1): before[(TOPIC, 1)]}


def listed_topics(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def test_the_offsets_topic_is_listed_from_a_groups_first_use_and_after_restarts(
    node_factory: Any,
) -> None:
    # As in Kafka: a fresh cluster lists only the topics made; the first group creates
    # __consumer_offsets, which a restart keeps.
    node = node_factory(topics=[(TOPIC, 1)])
    node.start()
    assert listed_topics(node.bootstrap) == {TOPIC}
    node.stop()
    node.start()
    assert listed_topics(node.bootstrap) == {TOPIC}
    # A coordinator lookup alone (describing a group nobody uses) creates it, for good.
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.describe_consumer_groups(["nobody"])["nobody"].result(15)
    assert listed_topics(node.bootstrap) == {TOPIC, "__consumer_offsets"}
    node.stop()
    node.start()
    assert listed_topics(node.bootstrap) == {TOPIC, "__consumer_offsets"}
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "lister"})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    assert listed_topics(node.bootstrap) == {TOPIC, "__consumer_offsets"}
    node.kill()
    node.start()
    assert listed_topics(node.bootstrap) == {TOPIC, "__consumer_offsets"}
    node.stop()


def test_a_segment_deleted_while_it_is_sized_counts_as_empty(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A partition still loading is sized from its files, while the loader's thread may delete
    # a segment a finished cleaning replaced. A file gone between the listing and its stat
    # must not fail the request: on a data-dir server an OSError under a request halts it.
    from minicoord.server.broker import Broker
    from minicoord.server.config import Config
    from minicoord.server.handlers import describe_log_dirs
    from minicoord.storage.log import LogManager, log_dir

    broker = Broker(Config(), logs=LogManager(tmp_path))
    folder = log_dir(tmp_path, TOPIC, 0)
    folder.mkdir()
    (folder / "00000000000000000000.log").write_bytes(b"x" * 100)
    vanished = folder / "00000000000000000007.log"
    listed = Path.glob

    def glob_then_delete(self: Path, pattern: str) -> Any:
        yield from listed(self, pattern)
        yield vanished  # listed, then deleted before its stat

    monkeypatch.setattr(Path, "glob", glob_then_delete)
    assert describe_log_dirs._size(broker, TOPIC, 0) == 100
