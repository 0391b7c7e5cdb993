"""A confluent-kafka group member in its own process, driven over stdin/stdout (JSON lines).

Usage: durability_member.py BOOTSTRAP GROUP TOPIC NAME SESSION_MS HEARTBEAT_MS

Prints {"event": "assign" | "revoke", "partitions": [...], "member_id": ...} from its
rebalance callbacks (so every assignment the client receives is counted), and answers
commands read from stdin:
  {"cmd": "commit", "offsets": {"P": OFFSET, ...}}  -> {"event": "committed", "error": ...}
  {"cmd": "fetch", "partitions": [P, ...]}           -> {"event": "fetched", "offsets": {...}}
  {"cmd": "quit"}                                    -> closes the consumer (LeaveGroup)
It exits by itself after LIFETIME_S, or when stdin closes, so it never outlives its test.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

LIFETIME_S = 90.0


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def read_commands(commands: queue.Queue[dict[str, Any] | None]) -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            commands.put(json.loads(line))
    commands.put(None)


def main(argv: list[str]) -> int:
    bootstrap, group, topic, name, session_ms, heartbeat_ms = argv[1:7]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "session.timeout.ms": int(session_ms),
            "heartbeat.interval.ms": int(heartbeat_ms),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "topic.metadata.refresh.interval.ms": 3000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
        }
    )

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        emit(
            {
                "event": "assign",
                "partitions": sorted(tp.partition for tp in partitions),
                "member_id": c.memberid(),
            }
        )

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        emit(
            {
                "event": "revoke",
                "partitions": sorted(tp.partition for tp in partitions),
                "member_id": c.memberid(),
            }
        )

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    commands: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=read_commands, args=(commands,), daemon=True).start()
    deadline = time.monotonic() + LIFETIME_S
    while time.monotonic() < deadline:
        consumer.poll(0.1)
        try:
            cmd = commands.get_nowait()
        except queue.Empty:
            continue
        if cmd is None or cmd["cmd"] == "quit":
            break
        if cmd["cmd"] == "commit":
            tps = [TopicPartition(topic, int(p), o) for p, o in cmd["offsets"].items()]
            try:
                consumer.commit(offsets=tps, asynchronous=False)
            except KafkaException as exc:
                emit({"event": "committed", "error": str(exc)})
            else:
                emit({"event": "committed", "error": None})
        elif cmd["cmd"] == "fetch":
            tps = [TopicPartition(topic, p) for p in cmd["partitions"]]
            try:
                got = consumer.committed(tps, timeout=10)
            except KafkaException as exc:
                emit({"event": "fetched", "error": str(exc), "offsets": {}})
            else:
                offsets = {str(tp.partition): tp.offset for tp in got}
                emit({"event": "fetched", "error": None, "offsets": offsets})
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
