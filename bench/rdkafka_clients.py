"""The stock librdkafka clients (confluent-kafka) as the data scenario drives them: one
producer and one consumer per task, librdkafka's defaults but for what is noted here.

Everything here is a blocking call, run in a thread of the task's event loop
(data_scenario.py); confluent-kafka is imported when a client is made, so that importing
this module (on the driver, in the cluster probe) needs none.
"""

from __future__ import annotations

import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from minicoord.bench.task_run import TaskRun
from minicoord.clients.timings import KIND_MARK

STAMP = struct.Struct(">q")  # wall clock (ns) at produce(): the first 8 bytes of an e2e record

POLL_EVERY = 1024  # produce() calls between two polls that serve delivery reports
QUEUE_FULL_WAIT_S = 0.001  # librdkafka's queue is full: serve reports while it drains
CONSUME_BATCH = 1000
CONSUME_WAIT_S = 0.05
PACE_NAP_S = 0.0005
FLUSH_TIMEOUT_S = 120.0


def _config(run: TaskRun, extra_key: str) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": run.plan.bootstrap,
        "client.id": f"bench-{run.plan.target}-{run.plan.task}",
        # Warnings and errors reach the console; librdkafka's info lines (telemetry) do not.
        "log_level": 4,
    }
    conf.update(dict(run.p.get(extra_key) or {}))
    return conf


@dataclass
class Delivery:
    """Failed deliveries by error name: with `delivery.report.only.error` librdkafka calls
    back only for these, so the produce loop pays nothing per successful record."""

    failed: Counter[str] = field(default_factory=Counter)

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed[err.name()] += 1


def make_producer(run: TaskRun, delivery: Delivery) -> Any:
    from confluent_kafka import Producer

    conf = _config(run, "producer_config")
    conf.setdefault("delivery.report.only.error", True)
    conf["on_delivery"] = delivery
    return Producer(conf)


class Membership:
    """A consumer's partitions as its rebalance callbacks leave them; paused as they are
    assigned until the step starts all consumers together (`pause` off from then on: a
    rebalance mid-step must not freeze the partitions it hands over)."""

    def __init__(self, pause: bool) -> None:
        self.pause = pause
        self.assigned: list[Any] = []
        self.events: list[tuple[str, float, int]] = []  # (callback, perf_counter, partitions)

    def on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.assign(partitions)
        if self.pause:
            consumer.pause(partitions)
        self.assigned = list(partitions)
        self.events.append(("assigned", time.perf_counter(), len(partitions)))

    def on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.assigned = []
        self.events.append(("revoked", time.perf_counter(), len(partitions)))

    def rebalances(self, start: float, end: float) -> int:
        """Assignments received between `start` and `end`: after the group had settled, so
        each is a rebalance in the middle of the measure."""
        return sum(1 for name, at, _ in self.events if name == "assigned" and start < at <= end)

    def record(self, run: TaskRun) -> None:
        """Each callback as a mark row: when a rebalance came, and what it moved."""
        for name, at, n in self.events:
            run.recorder.add(KIND_MARK, name, member=run.plan.task, t0=at, value=n)


def make_consumer(run: TaskRun, group: str, topic: str, membership: Membership) -> Any:
    from confluent_kafka import Consumer

    conf = _config(run, "consumer_config")
    conf["group.id"] = group
    conf.setdefault("auto.offset.reset", "earliest")
    consumer = Consumer(conf)
    consumer.subscribe([topic], on_assign=membership.on_assign, on_revoke=membership.on_revoke)
    return consumer


def produce_back_to_back(producer: Any, topic: str, count: int, payload: bytes) -> int:
    """Hand `count` records to librdkafka as fast as it takes them; produce() calls made."""
    produce, poll = producer.produce, producer.poll
    sent = 0
    while sent < count:
        try:
            produce(topic, payload)
        except BufferError:
            poll(QUEUE_FULL_WAIT_S)
            continue
        sent += 1
        if not sent % POLL_EVERY:
            poll(0)
    return sent


def produce_paced(
    producer: Any,
    topic: str,
    rate: float,
    start: float,
    deadline: float,
    pad: bytes,
    warm_until: float = 0.0,
) -> int:
    """Records at `rate` per second from `start` to `deadline` (perf_counter), each stamped
    with the wall clock just before produce(), negated until `warm_until` (warm-up records:
    consumed and counted, their latency not kept); those due are sent at once after a late
    wake-up, so the offered rate holds. produce() calls made."""
    produce, poll = producer.produce, producer.poll
    sent = 0
    while True:
        now = time.perf_counter()
        if now >= deadline:
            return sent
        due = min(int((now - start) * rate) + 1, int((deadline - start) * rate))
        sign = -1 if now < warm_until else 1
        while sent < due:
            try:
                produce(topic, STAMP.pack(sign * time.time_ns()) + pad)
            except BufferError:
                poll(QUEUE_FULL_WAIT_S)
                continue
            sent += 1
        poll(0)
        # Record i is due at start + i / rate; a shorter nap than PACE_NAP_S would cost more
        # in wake-ups than the burst it saves.
        next_due = min(start + sent / rate, deadline)
        time.sleep(max(PACE_NAP_S, next_due - time.perf_counter()))


def flush(producer: Any, sent: int, delivery: Delivery) -> tuple[int, int]:
    """(delivered, failed) once librdkafka has an answer for every record (or gave up)."""
    left = producer.flush(FLUSH_TIMEOUT_S)
    failed = sum(delivery.failed.values()) + left
    return sent - failed, failed


def take(consumer: Any, wait: float) -> list[Any]:
    """The records ready now (up to a batch), else the first within `wait`. librdkafka's
    consume(n, timeout) waits for all n or the whole timeout: at a low rate every record
    would sit in a half-full batch for the timeout, and that wait is not the server's."""
    messages = consumer.consume(CONSUME_BATCH, 0)
    return messages or consumer.consume(1, wait)


def watermarks(consumer: Any, partitions: list[Any]) -> dict[int, tuple[int, int]]:
    """(low, high) watermark of each partition, asked of the server."""
    return {
        tp.partition: consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        for tp in partitions
    }


def partitions_short(
    consumer: Any, partitions: list[Any], marks: dict[int, tuple[int, int]]
) -> int:
    """Partitions with records whose position has not reached the high watermark yet (an
    empty partition's position stays unset: librdkafka's sticky partitioner leaves many
    partitions empty when records come faster than its linger)."""
    return sum(
        1
        for tp in consumer.position(partitions)
        if marks[tp.partition][1] > marks[tp.partition][0] and tp.offset < marks[tp.partition][1]
    )
