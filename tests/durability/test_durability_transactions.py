"""Transactions across a crash: what committed stays committed, what was open is aborted.

The coordinator's state is not kept across restarts (README, Transactions): a SIGKILL in the
middle of a transaction must still lose nothing a producer was told committed (its markers and
its offsets, read back from their transactional records in `__consumer_offsets` and the
marker there, were durable before EndTxn was answered), and must not leave read_committed
consumers stuck behind the transaction that was open. The restarted server aborts it (a
marker at the end of each partition it wrote to, the group's offsets partition included) as
its logs load.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from deliverykit import values_to_end
from durakit import minicoord_log

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
    group = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "crash-group"})
    metadata = group.consumer_group_metadata()
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 29)], metadata, CALL_S)
    group.close()
    assert read_all(node.bootstrap, "read_committed", 2) == [f"committed-{i}" for i in range(4)]
    node.kill()

    node.start()
    log = node.wait_log("transaction from before the restart aborted")
    # The two partitions of the topic, and the group's offsets partition, whose pending
    # offset (29) the abort drops.
    deadline = time.monotonic() + CALL_S
    for _ in range(150):
        if log.count("before the restart aborted") >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
        log = node.wait_log("transaction from before the restart aborted")
    assert log.count("transaction from before the restart aborted") == 3, log
    assert "__consumer_offsets-" in log, log
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
    node.stop()

    # In Kafka's format: each TxnOffsetCommit a transactional batch of the producer's in the
    # group's offsets partition, ended there by the transaction's marker (the second by the
    # abort written at the restart).
    dump = minicoord_log("dump", str(node.data_dir), "--topic", "__consumer_offsets")
    assert dump.returncode == 0, dump.stderr
    lines = [ln for ln in dump.stdout.splitlines() if "crash-group" in ln or "marker=" in ln]
    assert len(lines) == 4, dump.stdout
    first, commit, second, abort = lines
    assert "offset=17," in first and "producer_id=" in first, first
    producer_id = first[first.index("producer_id=") :]
    assert commit.endswith("marker=COMMIT " + producer_id), (first, commit)
    assert "offset=29," in second and producer_id in second, second
    assert abort.split("marker=")[1].startswith("ABORT"), abort
