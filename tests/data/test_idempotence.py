"""Idempotent producers: retries are answered with their original offsets and appended once;
sequence and epoch errors are Kafka's; the state comes back from the log after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from datakit import NOW, Plane, batch, records
from minicoord.protocol.errors import ErrorCode
from minicoord.server.broker import Broker
from minicoord.server.config import Config, ConfigError
from minicoord.server.data.producers import (
    INT32_MAX,
    ProducerIds,
    ProducerStates,
    in_sequence,
    last_sequence,
)
from minicoord.storage.batch import batch_info
from minicoord.storage.partition_log import PartitionLog

PID = 4000


def produce(plane: Plane, topic, n: int, seq: int, epoch: int = 0):  # type: ignore[no-untyped-def]
    return plane.produce(topic, batch(records(n), producer_id=PID, epoch=epoch, sequence=seq))


def test_a_retried_batch_gets_its_original_offset_and_is_not_appended_twice() -> None:
    plane = Plane()
    topic = plane.topic("t")
    first = produce(plane, topic, 3, seq=0)
    second = produce(plane, topic, 2, seq=3)
    assert (first.base_offset, second.base_offset) == (0, 3)
    retry = produce(plane, topic, 3, seq=0)  # the answer to the first was lost
    assert (retry.error, retry.base_offset) == (ErrorCode.NONE, 0)
    assert plane.data.partitions[("t", 0)].log.next_offset == 5
    # Kafka answers a duplicate with the stored batch's timestamp as log_append_time.
    assert (first.log_append_time, retry.log_append_time) == (-1, NOW)


def test_only_the_last_five_batches_are_remembered() -> None:
    plane = Plane()
    topic = plane.topic("t")
    for i in range(6):
        assert produce(plane, topic, 1, seq=i).error is ErrorCode.NONE
    assert produce(plane, topic, 1, seq=1).base_offset == 1  # still cached
    # The first batch is older than the five cached ones: not a duplicate, out of order.
    assert produce(plane, topic, 1, seq=0).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_gap_in_sequence_is_out_of_order() -> None:
    plane = Plane()
    topic = plane.topic("t")
    produce(plane, topic, 2, seq=0)
    outcome = produce(plane, topic, 1, seq=5)
    assert outcome.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert outcome.base_offset == -1
    assert plane.data.partitions[("t", 0)].log.next_offset == 2


def test_an_older_epoch_is_fenced_and_a_newer_one_restarts_at_zero() -> None:
    plane = Plane()
    topic = plane.topic("t")
    produce(plane, topic, 2, seq=0, epoch=3)
    assert produce(plane, topic, 1, seq=2, epoch=2).error is ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(plane, topic, 1, seq=7, epoch=4).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(plane, topic, 1, seq=0, epoch=4).error is ErrorCode.NONE
    # The old epoch's batches are no longer duplicates.
    assert produce(plane, topic, 2, seq=0, epoch=3).error is ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_unknown_producer_may_start_at_any_sequence() -> None:
    plane = Plane()
    topic = plane.topic("t")
    assert produce(plane, topic, 1, seq=1234).error is ErrorCode.NONE
    assert produce(plane, topic, 1, seq=1235).error is ErrorCode.NONE


def test_sequences_wrap_at_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert in_sequence(INT32_MAX, 0) and not in_sequence(INT32_MAX, 1)
    states = ProducerStates()
    info = batch_info(batch(records(2), producer_id=PID, epoch=0, sequence=INT32_MAX - 1))
    states.update(info, 10)
    nxt = batch_info(batch(records(1), producer_id=PID, epoch=0, sequence=0))
    assert states.check(nxt).error is ErrorCode.NONE


def test_plain_producers_are_not_tracked() -> None:
    plane = Plane()
    topic = plane.topic("t")
    for _ in range(3):
        assert plane.produce(topic, batch(records(1))).error is ErrorCode.NONE
    assert plane.data.partitions[("t", 0)].producers.producers == {}
    assert plane.data.partitions[("t", 0)].log.next_offset == 3


def test_producer_state_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path, "t-0", 1 << 20)
    plog.open()
    states = ProducerStates()
    for seq, count in ((0, 2), (2, 3), (5, 1)):  # offsets 0-1, 2-4, 5
        data = bytearray(batch(records(count), producer_id=PID, epoch=1, sequence=seq))
        info = batch_info(data)
        states.update(info, plog.reserve(data, info))
    plog.flush()
    plog.close()
    rebuilt = ProducerStates()
    again = PartitionLog(tmp_path, "t-0", 1 << 20)
    again.open(rebuilt.load)
    assert rebuilt.producers.keys() == states.producers.keys()
    assert list(rebuilt.producers[PID].batches) == list(states.producers[PID].batches)
    # A retry of the batch written before the restart is recognised.
    retry = batch_info(batch(records(1), producer_id=PID, epoch=1, sequence=5))
    check = rebuilt.check(retry)
    assert check.duplicate is not None and check.duplicate.base_offset == 5


def test_a_producer_silent_past_its_expiration_is_forgotten() -> None:
    plane = Plane(Config(producer_id_expiration_ms=60_000))
    topic = plane.topic("t")
    assert produce(plane, topic, 2, seq=0).base_offset == 0  # A's batch carries NOW
    later = batch(records(1), producer_id=PID + 1, epoch=0, sequence=0, timestamp=NOW + 30_000)
    assert plane.produce(topic, later).base_offset == 2
    producers = plane.data.partitions[("t", 0)].producers
    assert plane.data.expire_producers(NOW + 59_999) == 0
    assert plane.data.expire_producers(NOW + 60_000) == 1  # Kafka: now - last >= expiration
    assert set(producers.producers) == {PID + 1}
    # A is unknown again: a retry of its batch is a new append, as in Kafka once it expired.
    assert produce(plane, topic, 2, seq=0).base_offset == 3
    retry = plane.produce(topic, later)
    assert (retry.error, retry.base_offset) == (ErrorCode.NONE, 2)  # B is still known


def test_the_broker_looks_for_expired_producers_every_check_interval() -> None:
    clock = [NOW]
    config = Config(
        producer_id_expiration_ms=60_000, producer_id_expiration_check_interval_ms=10_000
    )
    broker = Broker(config, clock=lambda: clock[0])
    loop = asyncio.new_event_loop()
    try:
        broker.attach(loop)
        topic, _ = broker.topics.create("t", 1, None)
        broker.data.create_logs(topic)
        appended = broker.data.append(
            topic, 0, batch(records(1), producer_id=PID, epoch=0, sequence=0), NOW, 9, "test"
        )
        assert appended.error is ErrorCode.NONE
        producers = broker.data.partitions[("t", 0)].producers.producers
        for step in range(1, 7):
            clock[0] = NOW + step * 10_000
            for callback in broker.timers.pop_due(clock[0]):
                callback(clock[0])
            assert (PID in producers) == (step < 6), step
    finally:
        broker.close()
        loop.close()


@pytest.mark.parametrize(
    "name", ["producer.id.expiration.ms", "producer.id.expiration.check.interval.ms"]
)
def test_producer_expiration_configs_are_at_least_one(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Config.from_pairs([(name, "0")])
    assert Config.from_pairs([(name, "1")])


def test_producer_ids_are_handed_out_once_across_restarts() -> None:
    ids = ProducerIds()
    assert ids.needs_block()
    persisted = ids.claim_block()  # what the metadata log records before any id is used
    first = [ids.allocate() for _ in range(3)]
    assert first == [0, 1, 2] and persisted == ProducerIds.BLOCK
    restarted = ProducerIds()
    restarted.restore(persisted)
    assert restarted.needs_block()
    restarted.claim_block()
    assert restarted.allocate() == ProducerIds.BLOCK
