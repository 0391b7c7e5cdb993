"""What a server loads at start, and that what it loads later still serves stock clients.

The serve process defers kafka-python's client package and builds no protocol class, handler or
admin endpoint it has not been asked for. Run in a fresh interpreter (this test process has
imported everything long ago): start a server as `minicoord serve` does, check what is loaded,
then drive a kafka-python consumer group against it from the same process, which needs the
client package the stand-in deferred and the handlers loaded on first request. The consumer
protocol (KIP-848) loads with its first group: not for a classic group, but when a
confluent-kafka consumer with `group.protocol=consumer` joins, which it then serves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = """
import json
import sys
import time

# An editable install's import hook loads ipaddress (through pathlib) before any minicoord
# module: forgotten here, it shows up again only if minicoord imports it itself.
sys.modules.pop("ipaddress", None)

from minicoord.protocol import deferred
from minicoord.server import lazy_kafka

lazy_kafka.defer_client_package()
from minicoord.testing.embedded import EmbeddedServer

NOT_AT_START = [
    "kafka.admin", "kafka.consumer", "kafka.producer", "kafka.net",
    "kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.metadata",
    "kafka.protocol.api_data", "kafka.record", "kafka.codec", "crc32c", "re2",
    "prometheus_client", "cryptography", "scramp", "hmac",
    "minicoord.server.security.sasl", "minicoord.server.security.tls",
    "minicoord.server.security.connections", "minicoord.server.security.certs",
    "minicoord.server.metrics", "minicoord.server.admin_http",
    "minicoord.server.handlers.api_versions", "minicoord.server.handlers.join_group",
    "minicoord.server.faults", "minicoord.server.fault_answers", "ipaddress",
    "minicoord.storage.cleaner", "minicoord.server.coordinator.consumer.describe",
    "minicoord.server.coordinator.consumer.mixed",
]
CONSUMER_PROTOCOL = [
    "minicoord.server.coordinator.consumer.manager", "minicoord.server.coordinator.consumer.group",
    "minicoord.server.coordinator.consumer.requests", "minicoord.server.coordinator.assignors",
]
with EmbeddedServer() as server:
    report = {"at_start": [m for m in NOT_AT_START + CONSUMER_PROTOCOL if m in sys.modules]}
    report["records_run"] = [
        m for m in ("classic_records", "consumer_records", "metadata_records")
        if deferred.loaded(f"minicoord.protocol.{m}")
    ]
    # A topic's first metadata record is its first batch (CRC-32C and all): made after the check.
    server.call(lambda: server.server.broker.create_topic("lazy", 2))
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        "lazy", bootstrap_servers=server.bootstrap, group_id="lazy-group",
        enable_auto_commit=False, auto_offset_reset="earliest",
    )
    deadline = time.monotonic() + 60
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    report["assignment"] = sorted(tp.partition for tp in consumer.assignment())
    tp = TopicPartition("lazy", 1)
    consumer.commit({tp: OffsetAndMetadata(7, "m", -1)})
    report["committed"] = consumer.committed(tp)
    consumer.close()
    report["after_classic"] = [m for m in CONSUMER_PROTOCOL if m in sys.modules]

    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": "lazy-848",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
    })
    consumer.subscribe(["lazy"])
    deadline = time.monotonic() + 60
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(0.2)
    report["consumer_assignment"] = sorted(tp.partition for tp in consumer.assignment())
    consumer.close()
    report["after_consumer"] = [m for m in CONSUMER_PROTOCOL if m in sys.modules]
    handlers = "minicoord.server.handlers."
    report["handlers"] = sorted(m[len(handlers):] for m in sys.modules if m.startswith(handlers))
print(json.dumps(report))
"""


def test_start_loads_only_what_serving_needs_and_clients_still_work() -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["at_start"] == []
    assert report["records_run"] == []
    assert report["assignment"] == [0, 1]
    assert report["committed"] == 7
    assert report["after_classic"] == []
    assert report["consumer_assignment"] == [0, 1]
    assert report["after_consumer"] == [
        "minicoord.server.coordinator.consumer.manager",
        "minicoord.server.coordinator.consumer.group",
        "minicoord.server.coordinator.consumer.requests",
        "minicoord.server.coordinator.assignors",
    ]
    # Loaded as the consumer asked for them; nobody asked to create or delete anything.
    assert {"api_versions", "metadata", "find_coordinator", "join_group", "sync_group"} <= set(
        report["handlers"]
    )
    assert {"offset_commit", "offset_fetch"} <= set(report["handlers"])
    assert not {"create_topics", "delete_topics", "delete_groups"} & set(report["handlers"])
