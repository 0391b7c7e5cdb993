"""Wall-clock timings of stock clients against a real minicoord process.

- cold join: a confluent-kafka consumer from construction to its first assignment;
- rebalance after a leave: three aiokafka consumers share a 6-partition topic, one stops
  (LeaveGroup), and we time until the other two hold a new assignment covering all six.

Each is repeated and reported as median/min/max. Run:

    python -m minicoord.bench.client_timings --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

from minicoord.server.process import start_server_process

TOPIC = "bench6"
PARTITIONS = 6


def confluent_cold_join(bootstrap: str, rounds: int) -> list[float]:
    from confluent_kafka import Consumer

    timings = []
    for _ in range(rounds):
        assigned: list[float] = []
        started = time.perf_counter()
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"cold-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )
        consumer.subscribe(
            [TOPIC], on_assign=lambda c, ps, out=assigned: out.append(time.perf_counter())
        )
        deadline = started + 30
        while not assigned and time.perf_counter() < deadline:
            consumer.poll(0.005)
        consumer.close()
        if not assigned:
            raise RuntimeError("confluent-kafka consumer got no assignment within 30 s")
        timings.append(assigned[0] - started)
    return timings


async def aiokafka_rebalance_after_leave(
    bootstrap: str, rounds: int, heartbeat_ms: int
) -> list[float]:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Recorder(ConsumerRebalanceListener):  # type: ignore[misc]
        def __init__(self) -> None:
            self.assigned_at = 0.0
            self.partitions: set[int] = set()

        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            self.assigned_at = time.perf_counter()
            self.partitions = {tp.partition for tp in assigned}

    async def settle(recorders: list[Recorder], consumers: list[Any], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            owned = [r.partitions for r in recorders]
            if sum(map(len, owned)) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS)):
                return
            await asyncio.gather(*(c.getmany(timeout_ms=5) for c in consumers))
        raise RuntimeError("group did not settle")

    timings = []
    for _ in range(rounds):
        group = f"rebalance-{uuid.uuid4().hex[:8]}"
        recorders = [Recorder() for _ in range(3)]
        consumers = []
        for recorder in recorders:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                enable_auto_commit=False,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=heartbeat_ms,
            )
            consumer.subscribe([TOPIC], listener=recorder)
            await consumer.start()
            consumers.append(consumer)
        await settle(recorders, consumers, 60)
        leaver, stayers = consumers[2], consumers[:2]
        for r in recorders[:2]:
            r.partitions = set()
        started = time.perf_counter()
        await leaver.stop()
        await settle(recorders[:2], stayers, 60)
        timings.append(max(r.assigned_at for r in recorders[:2]) - started)
        for consumer in stayers:
            await consumer.stop()
    return timings


def summary(name: str, timings: list[float]) -> dict[str, Any]:
    ms = [t * 1000 for t in timings]
    return {
        "measure": name,
        "rounds": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "min_ms": round(min(ms), 1),
        "max_ms": round(max(ms), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        nargs="+",
        default=[3000, 100],
        help="aiokafka heartbeat.interval.ms values to measure the rebalance at",
    )
    args = parser.parse_args()
    server = start_server_process(topics=[(TOPIC, PARTITIONS)])
    try:
        results = [
            summary("confluent-kafka cold join", confluent_cold_join(server.bootstrap, args.rounds))
        ]
        for hb in args.heartbeat_ms:
            timings = asyncio.run(aiokafka_rebalance_after_leave(server.bootstrap, args.rounds, hb))
            results.append(
                summary(f"aiokafka 3-member rebalance after a leave (heartbeat {hb} ms)", timings)
            )
    finally:
        server.stop()
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
