"""One consumer-group member run by a Python Kafka client, driven by tests/matrix over stdio.

Usage: py_member.py CLIENT BOOTSTRAP GROUP TOPIC OPTIONS_JSON
CLIENT is confluent or kafka-python; OPTIONS_JSON holds session_ms, heartbeat_ms, rebalance_ms,
assignor ("range" or "roundrobin") and client_id; for confluent, "group_protocol": "consumer"
joins with KIP-848's ConsumerGroupHeartbeat instead (the coordinator assigns, with the
assignor "remote_assignor" names if given; session and heartbeat are the server's).
It speaks the same JSON-lines protocol as node/member.mjs: events on stdout ("assigned",
"revoked", "commit", "error", "started", "closed"), commands on stdin ({"cmd": "commit",
"offsets": {"0": 10}}, {"cmd": "leave"}).
SIGTERM and the end of stdin leave too. Both clients are polled from this one thread, and the
commands are run between polls (neither client may be used from two threads at once).
"""

from __future__ import annotations

import json
import queue
import signal
import sys
import threading
import time
from typing import Any

LIFETIME_S = 150.0

commands: queue.Queue[dict[str, Any]] = queue.Queue()


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def read_stdin() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            commands.put(json.loads(line))
        except ValueError:
            emit({"event": "error", "message": f"bad command line {line!r}"})
    commands.put({"cmd": "leave", "reason": "stdin closed"})


def on_signal(signum: int, frame: Any) -> None:
    commands.put({"cmd": "leave", "reason": signal.Signals(signum).name})


class Confluent:
    def __init__(self, bootstrap: str, group: str, topic: str, opts: dict[str, Any]) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": opts["client_id"],
            "max.poll.interval.ms": opts["rebalance_ms"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 3000,
        }
        # The consumer protocol hands partitions out and takes them back one by one; the
        # classic one (eager "range", "roundrobin") revokes everything on each rebalance.
        self.incremental = opts.get("group_protocol") == "consumer"
        if self.incremental:
            config["group.protocol"] = "consumer"
            if opts.get("remote_assignor"):
                config["group.remote.assignor"] = opts["remote_assignor"]
        else:
            config["session.timeout.ms"] = opts["session_ms"]
            config["heartbeat.interval.ms"] = opts["heartbeat_ms"]
            config["partition.assignment.strategy"] = opts["assignor"]
        self.owned: set[int] = set()
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        parts = {tp.partition for tp in partitions if tp.topic == self.topic}
        self.owned = self.owned | parts if self.incremental else parts
        member_id = consumer.memberid()
        emit(
            {
                "event": "assigned",
                "partitions": sorted(self.owned),
                "member_id": member_id,
                "generation": None,
            }
        )

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        parts = {tp.partition for tp in partitions if tp.topic == self.topic}
        member_id = consumer.memberid()
        emit({"event": "revoked", "partitions": sorted(parts), "member_id": member_id})
        self.owned -= parts
        if self.incremental and self.owned:
            # "revoked" means "owns nothing" to the tests; say what it kept.
            kept = sorted(self.owned)
            emit(
                {
                    "event": "assigned",
                    "partitions": kept,
                    "member_id": member_id,
                    "generation": None,
                }
            )

    def poll(self) -> None:
        self.consumer.poll(0.05)

    def commit(self, offsets: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        for tp in self.consumer.commit(offsets=tps, asynchronous=False) or []:
            if tp.error is not None:
                raise RuntimeError(f"partition {tp.partition}: {tp.error}")

    def close(self) -> None:
        self.consumer.close()


class KafkaPython:
    def __init__(self, bootstrap: str, group: str, topic: str, opts: dict[str, Any]) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=opts["client_id"],
            session_timeout_ms=opts["session_ms"],
            heartbeat_interval_ms=opts["heartbeat_ms"],
            max_poll_interval_ms=opts["rebalance_ms"],
            partition_assignment_strategy=[assignors[opts["assignor"]]],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            metadata_max_age_ms=3000,
        )
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_assigned(self, assigned: Any) -> None:
                meta = member.consumer.group_metadata()
                parts = sorted(tp.partition for tp in assigned if tp.topic == member.topic)
                emit(
                    {
                        "event": "assigned",
                        "partitions": parts,
                        "member_id": meta.member_id,
                        "generation": meta.generation_id,
                    }
                )

            def on_partitions_revoked(self, revoked: Any) -> None:
                parts = sorted(tp.partition for tp in revoked if tp.topic == member.topic)
                meta = member.consumer.group_metadata()
                emit({"event": "revoked", "partitions": parts, "member_id": meta.member_id})

        self.consumer.subscribe([topic], listener=Listener())
        # Refresh metadata before the first poll joins (tests/clients does the same: it works
        # around a kafka-python 3.0.12 join race).
        self.consumer.topics()

    def poll(self) -> None:
        self.consumer.poll(timeout_ms=50)

    def commit(self, offsets: dict[int, int]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self.consumer.commit(
            {
                TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()
            }
        )

    def close(self) -> None:
        self.consumer.close()


def main(argv: list[str]) -> int:
    client, bootstrap, group, topic, raw = argv[1:6]
    opts = {
        "session_ms": 6000,
        "heartbeat_ms": 500,
        "rebalance_ms": 15000,
        "assignor": "range",
        "client_id": f"matrix-{client}",
        **json.loads(raw),
    }
    kinds = {"confluent": Confluent, "kafka-python": KafkaPython}
    if client not in kinds:
        print(f"unknown client {client!r}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    threading.Thread(target=read_stdin, daemon=True).start()
    member = kinds[client](bootstrap, group, topic, opts)
    emit({"event": "started", "client": client, "client_id": opts["client_id"]})
    reason = "lifetime"
    deadline = time.monotonic() + LIFETIME_S
    while time.monotonic() < deadline:
        member.poll()
        try:
            command = commands.get_nowait()
        except queue.Empty:
            continue
        if command.get("cmd") == "leave":
            reason = command.get("reason", "leave")
            break
        if command.get("cmd") == "commit":
            offsets = {int(p): int(o) for p, o in command["offsets"].items()}
            try:
                member.commit(offsets)
                emit({"event": "commit", "ok": True, "offsets": command["offsets"]})
            except Exception as exc:
                emit(
                    {
                        "event": "commit",
                        "ok": False,
                        "offsets": command["offsets"],
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
        else:
            emit({"event": "error", "message": f"unknown command {command!r}"})
    member.close()
    emit({"event": "closed", "reason": reason})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
