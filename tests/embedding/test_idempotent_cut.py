"""An idempotent producer whose connection is cut after its batches were written ends with
every message exactly once: the retries are recognised by their producer id and sequence.

The fault (`cut_connection`) closes the connection of a Produce request after it took effect,
so the producer sees a lost answer and retries, the case idempotence exists for. The messages
are then read back from the beginning of each partition: per partition, exactly the values
sent there, in the order sent, no duplicate and no gap.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from minicoord.testing import running

TOPIC = "idempotent"
PARTITIONS = 3
MESSAGES = 3000


def produce_all(bootstrap: str) -> dict[int, list[int]]:
    """Send MESSAGES values; the partition and order each was acknowledged in."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 100,  # many requests, so the cuts land mid-stream
            "message.timeout.ms": 30000,
            "retry.backoff.ms": 50,
        }
    )
    acked: dict[int, list[int]] = defaultdict(list)
    failures: list[str] = []

    def delivered(error: KafkaError | None, message) -> None:  # type: ignore[no-untyped-def]
        if error is not None:
            failures.append(str(error))
        else:
            acked[message.partition()].append(int(message.value()))

    for i in range(MESSAGES):
        producer.produce(
            TOPIC, value=str(i).encode(), partition=i % PARTITIONS, on_delivery=delivered
        )
        producer.poll(0)
    assert producer.flush(60) == 0, "messages still in flight"
    assert failures == []
    return dict(acked)


def read_all(bootstrap: str) -> dict[int, list[int]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[int]] = defaultdict(list)
    deadline = time.monotonic() + 30
    while sum(map(len, seen.values())) < MESSAGES and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.5):
            if message.error() is None:
                seen[message.partition()].append(int(message.value()))
    # Nothing more: a duplicate appended after the end would show here.
    for message in consumer.consume(500, 1.0):
        if message.error() is None:
            seen[message.partition()].append(int(message.value()))
    consumer.close()
    return dict(seen)


@pytest.mark.parametrize("after", [True, False], ids=["answer-lost", "request-lost"])
def test_cut_connections_leave_no_duplicate_and_no_gap(after: bool) -> None:
    with running(topics=[(TOPIC, PARTITIONS)]) as server:
        server.control.cut_connection("Produce", 4, after_handling=after)
        acked = produce_all(server.bootstrap)
        assert server.call(lambda: server.server.broker.faults.cut_rules) == []  # all 4 cut
        duplicates = server.call(lambda: server.server.broker.data.duplicates)
        stored = read_all(server.bootstrap)
    # A lost answer makes the producer resend what was already written: recognised, not
    # appended again. A lost request is simply sent again.
    assert (duplicates > 0) == after
    expected = {p: [i for i in range(MESSAGES) if i % PARTITIONS == p] for p in range(PARTITIONS)}
    assert stored == expected  # each exactly once, in the order sent
    assert {p: sorted(v) for p, v in acked.items()} == expected


def test_injected_produce_errors_are_retried_by_the_producer() -> None:
    # A retriable per-partition error, as a leader change gives: the producer retries the
    # batches and nothing is lost or doubled.
    with running(topics=[(TOPIC, PARTITIONS)]) as server:
        server.control.fail_next("Produce", 3, "NOT_LEADER_OR_FOLLOWER")
        acked = produce_all(server.bootstrap)
        rules_left = server.call(lambda: list(server.server.broker.faults.fail_rules))
        stored = read_all(server.bootstrap)
    assert rules_left == []  # all 3 failures were served
    expected = {p: [i for i in range(MESSAGES) if i % PARTITIONS == p] for p in range(PARTITIONS)}
    assert stored == expected
    assert {p: sorted(v) for p, v in acked.items()} == expected
