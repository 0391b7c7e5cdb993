"""A group member in a process of its own, for tests that SIGKILL it (no LeaveGroup is sent).

Usage: member_child.py CLIENT BOOTSTRAP GROUP TOPIC OPTIONS_JSON
CLIENT is confluent, kafka-python or aiokafka; OPTIONS_JSON holds session_ms, heartbeat_ms
and optionally instance_id; for confluent, "group_protocol": "consumer" joins with KIP-848's
ConsumerGroupHeartbeat instead (the session and heartbeat interval are then the server's).
Each time the member's assignment changes it prints one JSON line
{"event": "assignment", "partitions": [...], "member_id": ...}. It exits by itself after
LIFETIME_S, so an orphan can never outlive its test for long.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

LIFETIME_S = 120.0


def report(partitions: set[int], member_id: str | None) -> None:
    line = {"event": "assignment", "partitions": sorted(partitions), "member_id": member_id}
    print(json.dumps(line), flush=True)


def run_confluent(bootstrap: str, group: str, topic: str, opts: dict[str, Any]) -> None:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 3000,
    }
    if opts.get("group_protocol") == "consumer":
        # librdkafka refuses the classic session settings with this protocol.
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = opts["session_ms"]
        config["heartbeat.interval.ms"] = opts["heartbeat_ms"]
    if opts.get("instance_id"):
        config["group.instance.id"] = opts["instance_id"]
    consumer = Consumer(config)
    consumer.subscribe([topic])
    last: set[int] | None = None
    deadline = time.monotonic() + LIFETIME_S
    while time.monotonic() < deadline:
        consumer.poll(0.1)
        now = {tp.partition for tp in consumer.assignment()}
        if now != last:
            last = now
            report(now, consumer.memberid())
    consumer.close()


def run_kafka_python(bootstrap: str, group: str, topic: str, opts: dict[str, Any]) -> None:
    from kafka import KafkaConsumer

    kwargs: dict[str, Any] = {}
    if opts.get("instance_id"):
        kwargs["group_instance_id"] = opts["instance_id"]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=opts["session_ms"],
        heartbeat_interval_ms=opts["heartbeat_ms"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=3000,
        max_poll_interval_ms=20000,
        **kwargs,
    )
    consumer.subscribe([topic])
    # Refresh metadata before the first poll joins (works around a kafka-python 3.0.12 join
    # race; see test_kafka_python.Member).
    consumer.topics()
    last: set[int] | None = None
    deadline = time.monotonic() + LIFETIME_S
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=100)
        now = {tp.partition for tp in consumer.assignment()}
        if now != last:
            last = now
            report(now, consumer.group_metadata().member_id)
    consumer.close()


async def run_aiokafka(bootstrap: str, group: str, topic: str, opts: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaConsumer

    kwargs: dict[str, Any] = {}
    if opts.get("instance_id"):
        kwargs["group_instance_id"] = opts["instance_id"]
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=opts["session_ms"],
        heartbeat_interval_ms=opts["heartbeat_ms"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=3000,
        **kwargs,
    )
    await consumer.start()
    last: set[int] | None = None
    deadline = time.monotonic() + LIFETIME_S
    try:
        while time.monotonic() < deadline:
            await consumer.getmany(timeout_ms=100)
            now = {tp.partition for tp in consumer.assignment()}
            if now != last:
                last = now
                report(now, consumer._coordinator.member_id)
    finally:
        await consumer.stop()


def main(argv: list[str]) -> int:
    client, bootstrap, group, topic, raw = argv[1:6]
    opts = json.loads(raw)
    if client == "confluent":
        run_confluent(bootstrap, group, topic, opts)
    elif client == "kafka-python":
        run_kafka_python(bootstrap, group, topic, opts)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, group, topic, opts))
    else:
        print(f"unknown client {client!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
