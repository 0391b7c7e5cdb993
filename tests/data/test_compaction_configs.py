"""Topic configs that decide what the log holds, through confluent-kafka against a running
server: a compacted topic's segment.ms and min.compaction.lag.ms, and compression.type."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from datakit import compact_offline
from kafka.record.default_records import DefaultRecordBatch
from minicoord.testing.embedded import running

ROUNDS = 12


def _produce(bootstrap: str, topic: str, base_ms: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(ROUNDS):
        # A batch each, 200 ms apart by their own timestamps: with segment.ms=100 every batch
        # after the first rolls the segment (Kafka rolls on the appended batch's timestamp).
        producer.produce(topic, key=b"k", value=str(i).encode(), timestamp=base_ms + 200 * i)
        producer.flush(10)


def _values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.monotonic_ns()}"}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            if out:
                break
            continue
        if msg.error() is None:
            out.append(msg.value())
    consumer.close()
    return out


def _create(admin: AdminClient, topics: dict[str, dict[str, str]]) -> None:
    """One-partition topics with these configs, created before returning."""
    futures = admin.create_topics([NewTopic(name, 1, config=cfg) for name, cfg in topics.items()])
    for future in futures.values():
        future.result(10)


def test_min_compaction_lag_protects_records_segment_ms_makes_them_cleanable() -> None:
    configs = {"log.cleaner.backoff.ms": 50}
    with running(configs) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        common = {
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
        }
        topics = {
            "lagged": {**common, "min.compaction.lag.ms": "3600000"},
            "unlagged": common,
        }
        _create(admin, topics)
        base = int(time.time() * 1000) - 60_000
        for name in topics:
            _produce(server.bootstrap, name, base)
        # The unlagged topic is compacted down to its newest values within a few cleaner
        # rounds (the active segment, holding the last batch, is never cleaned).
        deadline = time.monotonic() + 15
        unlagged = _values(server.bootstrap, "unlagged")
        while len(unlagged) > 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            unlagged = _values(server.bootstrap, "unlagged")
        assert unlagged[-1] == str(ROUNDS - 1).encode()
        assert len(unlagged) <= 2, unlagged
        # Every record of the lagged one is younger than its hour: all are still there.
        lagged = _values(server.bootstrap, "lagged")
        assert lagged == [str(i).encode() for i in range(ROUNDS)]


def test_compression_type_is_what_the_log_holds_and_consumers_read(tmp_path: Path) -> None:
    with running(data_dir=tmp_path) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        topic = NewTopic("zipped", 1, config={"compression.type": "gzip"})
        admin.create_topics([topic])["zipped"].result(10)
        producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "none"})
        for i in range(ROUNDS):
            producer.produce("zipped", key=b"k", value=str(i).encode() * 50)
        producer.flush(10)
        assert _values(server.bootstrap, "zipped") == [str(i).encode() * 50 for i in range(ROUNDS)]
    (segment,) = (tmp_path / "zipped-0").glob("*.log")
    data = segment.read_bytes()
    codecs = []
    at = 0
    while at < len(data):
        batch = DefaultRecordBatch(data[at:])
        codecs.append(batch.compression_type)
        at += 12 + int.from_bytes(data[at + 8 : at + 12], "big")
    assert codecs and set(codecs) == {1}  # gzip, though the producer sent none


def test_offline_compaction_keeps_what_min_compaction_lag_protects(tmp_path: Path) -> None:
    # `minicoord log compact` cleans each topic by its own configs, as the server's cleaner.
    with running(data_dir=tmp_path) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        topics = {
            "lagged": {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"},
            "unlagged": {"cleanup.policy": "compact"},
        }
        _create(admin, topics)
        base = int(time.time() * 1000) - 60_000
        for name in topics:
            _produce(server.bootstrap, name, base)
    compact_offline(tmp_path)
    with running(data_dir=tmp_path) as server:
        assert _values(server.bootstrap, "lagged") == [str(i).encode() for i in range(ROUNDS)]
        assert _values(server.bootstrap, "unlagged") == [str(ROUNDS - 1).encode()]


def test_offline_compaction_writes_segments_of_the_topics_own_segment_bytes(
    tmp_path: Path,
) -> None:
    # As the server's cleaner (and Kafka's): cleaned segments hold at most the topic's
    # segment.bytes of their sources, so retention can still delete them one by one.
    mib = 1 << 20
    with running(data_dir=tmp_path) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        _create(admin, {"sized": {"cleanup.policy": "compact", "segment.bytes": str(mib)}})
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
        for i in range(32):  # distinct keys: nothing is superseded
            producer.produce("sized", key=b"k%d" % i, value=b"x" * 100_000, partition=0)
            producer.flush(10)
        assert producer.flush(10) == 0
    compact_offline(tmp_path)
    sizes = [f.stat().st_size for f in sorted((tmp_path / "sized-0").glob("*.log"))]
    assert len(sizes) >= 3 and max(sizes) <= mib, sizes
    with running(data_dir=tmp_path) as server:
        assert len(_values(server.bootstrap, "sized")) == 32
