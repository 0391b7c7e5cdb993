"""Transactions across a crash, with stock clients: the coordinator's state is durable.

A SIGKILL in the middle of a transaction loses nothing: the transactional id's producer id,
epoch and open transaction are read back from `__transaction_state`, the partitions keep the
transaction open, and the offsets it committed (transactional records in `__consumer_offsets`)
wait for it again, so the same producer carries on and commits as against Kafka. A
transaction the crash left prepared (its PrepareCommit record durable, its markers not) is
committed by the restarted server. Only a transaction no coordinator knows of is aborted as
its partitions load (here: with the transaction log taken away), so no read_committed
consumer waits behind it for good.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from deliverykit import values_to_end
from durakit import find_coordinator_error, minicoord_log
from minicoord.protocol import transaction_records as tr
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record
from minicoord.storage.log import LogManager

pytestmark = pytest.mark.timeout(120)

TOPIC = "orders"
SOURCE = "payments"
GROUP = "crash-group"
CALL_S = 15
COMMITTED = [f"committed-{i}" for i in range(4)]
OPEN = [f"open-{i}" for i in range(3)]


def read_all(bootstrap: str, isolation: str, partitions: int = 2) -> list[str]:
    """Every value of TOPIC, read to each partition's end (as `isolation` sees the end)."""
    return sorted(values_to_end(bootstrap, TOPIC, partitions, isolation))


def committed_offset(bootstrap: str) -> int:
    """The group's committed offset of SOURCE-0. Not asked as stable (librdkafka asks so only
    under read_committed): an open transaction holding an offset would make it wait."""
    group = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "isolation.level": "read_uncommitted"}
    )
    try:
        (offset,) = group.committed([TopicPartition(SOURCE, 0)], CALL_S)
        return int(offset.offset)
    finally:
        group.close()


def wait_for_aborts(node: Any, count: int) -> str:
    """The server's log once it has aborted `count` transactions left open at the restart
    (bounded in time and tries); fails if it aborts another number."""
    aborted = "transaction from before the restart aborted"
    log = node.wait_log(aborted)
    deadline = time.monotonic() + CALL_S
    for _ in range(150):
        if log.count(aborted) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.1)
        log = node.wait_log(aborted)
    assert log.count(aborted) == count, log
    return log


def crash_with_a_transaction_open(node: Any) -> Producer:
    """One transaction committed (with offset 17), a second left open (with offset 29) when
    the server is killed; returns its producer."""
    node.start()
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "crash-1"})
    producer.init_transactions(CALL_S)
    group = Consumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP})
    metadata = group.consumer_group_metadata()
    producer.begin_transaction()
    for i, value in enumerate(COMMITTED):
        producer.produce(TOPIC, value=value.encode(), partition=i % 2)
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 17)], metadata, CALL_S)
    producer.commit_transaction(CALL_S)

    producer.begin_transaction()
    for i, value in enumerate(OPEN):
        producer.produce(TOPIC, value=value.encode(), partition=i % 2)
    producer.flush(CALL_S)
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 29)], metadata, CALL_S)
    group.close()
    assert read_all(node.bootstrap, "read_committed") == COMMITTED
    node.kill()
    return producer


def test_the_same_producer_commits_its_open_transaction_after_a_crash(node_factory: Any) -> None:
    node = node_factory(topics=[(TOPIC, 2), (SOURCE, 1)])
    producer = crash_with_a_transaction_open(node)

    node.start()
    log = node.wait_log("loaded 1 transactional ids (1 open)")
    assert "before the restart aborted" not in log, log
    # Still open: read_committed stops before it, and its offset is not the group's yet.
    assert read_all(node.bootstrap, "read_committed") == COMMITTED
    assert committed_offset(node.bootstrap) == 17

    producer.produce(TOPIC, value=b"after", partition=0)
    producer.commit_transaction(CALL_S)
    assert read_all(node.bootstrap, "read_committed") == sorted([*COMMITTED, *OPEN, "after"])
    assert committed_offset(node.bootstrap) == 29

    # The id kept its producer id: a new producer of it fences this one, as in Kafka.
    again = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "crash-1"})
    again.init_transactions(CALL_S)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"zombie", partition=0)
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction(CALL_S)
    assert fenced.value.args[0].fatal(), fenced.value
    again.begin_transaction()
    again.produce(TOPIC, value=b"new", partition=1)
    again.commit_transaction(CALL_S)
    assert read_all(node.bootstrap, "read_committed") == sorted([*COMMITTED, *OPEN, "after", "new"])
    node.stop()

    # In Kafka's formats on disk: the offsets as transactional records of the producer, each
    # settled by a marker in the group's offsets partition; the id's states in
    # __transaction_state.
    dump = minicoord_log("dump", str(node.data_dir), "--topic", "__consumer_offsets")
    assert dump.returncode == 0, dump.stderr
    lines = [ln for ln in dump.stdout.splitlines() if GROUP in ln or "marker=" in ln]
    assert len(lines) == 4, dump.stdout
    first, commit, second, commit2 = lines
    assert "offset=17," in first and "producer_id=" in first, first
    producer_id = first[first.index("producer_id=") :]
    assert commit.endswith("marker=COMMIT " + producer_id), (first, commit)
    assert "offset=29," in second and producer_id in second, second
    assert commit2.endswith("marker=COMMIT " + producer_id), commit2
    states = transaction_states(node.data_dir)
    # Each AddPartitionsToTxn or AddOffsetsToTxn that adds something writes Ongoing again.
    statuses = [s for i, (s, _) in enumerate(states) if i == 0 or states[i - 1][0] != s]
    assert statuses == [
        "Empty", "Ongoing", "PrepareCommit", "CompleteCommit",  # before the crash
        "Ongoing", "PrepareCommit", "CompleteCommit",  # the transaction across it
        "Empty", "Ongoing", "PrepareCommit", "CompleteCommit",  # the new producer's
    ]  # fmt: skip
    epochs = [value.producer_epoch for _, value in states]
    # One epoch until the new producer's InitProducerId bumped it (its Empty record on).
    bumped = [s for s, _ in states].index("Empty", 1)
    assert set(epochs[:bumped]) == {epochs[0]} and set(epochs[bumped:]) == {epochs[0] + 1}
    assert {value.producer_id for _, value in states} == {states[0][1].producer_id}


def transaction_states(data_dir: Path) -> list[tuple[str, Any]]:
    """Every `__transaction_state` record of "crash-1", oldest first: (status, value)."""
    partition = _partition_of("crash-1")
    logs = LogManager(data_dir)
    plog = logs.open_log("__transaction_state", partition, 1 << 20)
    try:
        out = []
        for record in plog.records():
            assert tr.decode_key(record.key) == "crash-1"
            assert record.value is not None
            value = tr.decode_value(record.value)
            out.append((tr.STATUS_NAMES[value.transaction_status], value))
        return out
    finally:
        plog.close()


def _partition_of(tid: str) -> int:
    from minicoord.server.coordinator.partitioning import partition_for

    return partition_for(tid, 50)


def test_a_transaction_a_crash_left_prepared_is_committed_at_the_restart(
    node_factory: Any,
) -> None:
    node = node_factory(topics=[(TOPIC, 2), (SOURCE, 1)])
    producer = crash_with_a_transaction_open(node)
    # As if the crash came after the PrepareCommit record was durable and before any marker:
    # the record Kafka's coordinator writes first, appended to the id's log.
    (status, ongoing), *_ = reversed(transaction_states(node.data_dir))
    assert status == "Ongoing"
    prepared = tr.encode_value(
        ongoing.producer_id,
        ongoing.producer_epoch,
        ongoing.transaction_timeout_ms,
        "PrepareCommit",
        tr.partitions_of(ongoing),
        ongoing.transaction_last_update_timestamp_ms,
        ongoing.transaction_start_timestamp_ms,
    )
    logs = LogManager(node.data_dir)
    plog = logs.open_log("__transaction_state", _partition_of("crash-1"), 1 << 20)
    plog.append([Record(tr.encode_key("crash-1"), prepared)], int(time.time() * 1000))
    plog.commit(plog.write_out())
    plog.close()

    node.start()
    node.wait_log("was committing when the server stopped: completing it")
    assert read_all(node.bootstrap, "read_committed") == sorted([*COMMITTED, *OPEN])
    assert committed_offset(node.bootstrap) == 29
    # The producer's retry of its commit finds it committed.
    producer.commit_transaction(CALL_S)
    assert [s for s, _ in transaction_states_after_stop(node)][-2:] == [
        "PrepareCommit",
        "CompleteCommit",
    ]


def transaction_states_after_stop(node: Any) -> list[tuple[str, Any]]:
    node.stop()
    return transaction_states(node.data_dir)


def test_a_transaction_no_coordinator_knows_is_aborted_as_its_partitions_load(
    node_factory: Any,
) -> None:
    node = node_factory(topics=[(TOPIC, 2), (SOURCE, 1)])
    crash_with_a_transaction_open(node)
    # A data directory without the transaction log (one from before it, say).
    for directory in node.data_dir.glob("__transaction_state-*"):
        shutil.rmtree(directory)

    node.start()
    # The two partitions of the topic, and the group's offsets partition, whose pending
    # offset (29) the abort drops.
    log = wait_for_aborts(node, 3)
    assert "__consumer_offsets-" in log, log
    assert read_all(node.bootstrap, "read_committed") == COMMITTED
    assert read_all(node.bootstrap, "read_uncommitted") == sorted([*COMMITTED, *OPEN])
    assert committed_offset(node.bootstrap) == 17

    # A new producer of the id starts afresh; its transaction commits as any other.
    again = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "crash-1"})
    again.init_transactions(CALL_S)
    again.begin_transaction()
    again.produce(TOPIC, value=b"after", partition=0)
    again.commit_transaction(CALL_S)
    assert read_all(node.bootstrap, "read_committed") == sorted([*COMMITTED, "after"])


def test_a_transaction_log_partition_that_does_not_read_back_refuses_only_its_ids(
    node_factory: Any,
) -> None:
    """A `__transaction_state` partition whose records do not decode is not served, with a
    log line: its ids get COORDINATOR_NOT_AVAILABLE, the transaction it held open is aborted
    as its partitions load (no coordinator holds it), and every other id is served."""
    node = node_factory(topics=[(TOPIC, 2), (SOURCE, 1)])
    crash_with_a_transaction_open(node)
    logs = LogManager(node.data_dir)
    plog = logs.open_log("__transaction_state", _partition_of("crash-1"), 1 << 20)
    plog.append([Record(tr.encode_key("crash-1"), b"\x00\x00not a value")], 0)
    plog.commit(plog.write_out())
    plog.close()

    node.start()
    node.wait_log(f"__transaction_state-{_partition_of('crash-1')} is not served")
    other = next(
        f"other-{i}" for i in range(100) if _partition_of(f"other-{i}") != _partition_of("crash-1")
    )
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert asyncio.run(find_coordinator_error(node.port, "crash-1", 1)) == unavailable
    assert asyncio.run(find_coordinator_error(node.port, other, 1)) == ErrorCode.NONE
    wait_for_aborts(node, 3)
    assert read_all(node.bootstrap, "read_committed") == COMMITTED
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": other})
    producer.init_transactions(CALL_S)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"other", partition=0)
    producer.commit_transaction(CALL_S)
    assert read_all(node.bootstrap, "read_committed") == sorted([*COMMITTED, "other"])
