"""Transactions across a crash: what committed stays committed, what was open is aborted.

The coordinator's state is not kept across restarts (README, Transactions): a SIGKILL in the
middle of a transaction must still lose nothing a producer was told committed (its markers and
its offsets were durable before EndTxn was answered), and must not leave read_committed
consumers stuck behind the transaction that was open. The restarted server aborts it (a
marker at the end of each partition it wrote to) as its log loads.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from deliverykit import values_to_end

pytestmark = pytest.mark.timeout(90)

TOPIC = "orders"
SOURCE = "payments"
CALL_S = 15


def read_all(bootstrap: str, isolation: str, partitions: int) -> list[str]:
    """Every value of TOPIC, read to each partition's end (as `isolation` sees the end)."""
    return sorted(values_to_end(bootstrap, TOPIC, partitions, isolation))


def test_a_crash_keeps_the_committed_transaction_and_aborts_the_open_one(
    node_factory: Any,
) -> None:
    node = node_factory(topics=[(TOPIC, 2), (SOURCE, 1)])
    node.start()
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "crash-1"})
    producer.init_transactions(CALL_S)
    group = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "crash-group"})
    producer.begin_transaction()
    for i in range(4):
        producer.produce(TOPIC, value=f"committed-{i}".encode(), partition=i % 2)
    metadata = group.consumer_group_metadata()
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 17)], metadata, CALL_S)
    producer.commit_transaction(CALL_S)
    group.close()

    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, value=f"open-{i}".encode(), partition=i % 2)
    producer.flush(CALL_S)
    assert read_all(node.bootstrap, "read_committed", 2) == [f"committed-{i}" for i in range(4)]
    node.kill()

    node.start()
    log = node.wait_log("transaction from before the restart aborted")
    assert log.count("transaction from before the restart aborted") == 2, log
    assert read_all(node.bootstrap, "read_committed", 2) == [f"committed-{i}" for i in range(4)]
    every = [f"committed-{i}" for i in range(4)] + [f"open-{i}" for i in range(3)]
    assert read_all(node.bootstrap, "read_uncommitted", 2) == sorted(every)
    group = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "crash-group"})
    (offset,) = group.committed([TopicPartition(SOURCE, 0)], CALL_S)
    assert offset.offset == 17
    group.close()

    # A new producer of the id starts afresh; its transaction commits as any other.
    again = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "crash-1"})
    again.init_transactions(CALL_S)
    again.begin_transaction()
    again.produce(TOPIC, value=b"after", partition=0)
    again.commit_transaction(CALL_S)
    expected = sorted([f"committed-{i}" for i in range(4)] + ["after"])
    assert read_all(node.bootstrap, "read_committed", 2) == expected
    del producer  # the pre-crash producer: never used again
