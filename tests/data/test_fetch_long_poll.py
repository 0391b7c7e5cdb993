"""A Fetch that waits for `min_bytes` (long poll), as Kafka's DelayedFetch completes it: the
bytes already readable from the fetch offset count, each partition at most its limit, and a
fetch whose offset lies in an older segment than the high watermark's does not wait at all
(a consumer catching up). On the data plane with a manual clock; over the wire with a server
whose longest wait (30 s) is far past each test's bound; and with librdkafka catching up."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from confluent_kafka import Consumer, Producer
from datakit import Plane, batch, fetch_partition, fetch_request, records
from kafka.protocol.producer import ProduceRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.server.data.fetching import WaitedLog
from minicoord.testing.embedded import running

MAX_WAIT_MS = 30_000
# Each wire test's bound: a fetch held until its max wait would blow it.
BOUND_S = 10


def test_bytes_already_readable_count_toward_min_bytes() -> None:
    plane = Plane()
    topic = plane.topic("t")
    log = plane.data.partitions[("t", 0)].log
    first, second = batch(records(5, "a")), batch(records(5, "b"))
    plane.produce(topic, first)
    ticket = object()
    # The fetch read `first` and wants a little more than there is.
    waited = WaitedLog(log, 0, 1 << 20, len(first))
    plane.data.fetch_waits.park(ticket, {log: waited}, len(first) + 1, plane.now + MAX_WAIT_MS)
    plane.data.append(topic, 0, second, plane.now, 9, "test")
    assert plane.end_turn() == [(ticket, None)]


def test_each_partition_counts_at_most_its_limit() -> None:
    plane = Plane()
    topic = plane.topic("t")
    log = plane.data.partitions[("t", 0)].log
    one = batch(records(5))
    ticket = object()
    limit = len(one) * 3 // 2
    waited = WaitedLog(log, 0, limit, 0)
    plane.data.fetch_waits.park(ticket, {log: waited}, limit + 1, plane.now + 500)
    for _ in range(3):
        plane.data.append(topic, 0, one, plane.now, 9, "test")
        assert plane.end_turn() == []  # at most `limit` counted, below min_bytes
    assert waited.counted == limit
    assert plane.advance(500) == [(ticket, None)]  # answered at its deadline


def test_a_roll_under_a_waiting_fetch_releases_it() -> None:
    plane = Plane()
    topic = plane.topic("t")
    log = plane.data.partitions[("t", 0)].log
    first = batch(records(3))
    plane.produce(topic, first)
    ticket = object()
    waited = WaitedLog(log, 0, 1 << 20, len(first))
    plane.data.fetch_waits.park(ticket, {log: waited}, 1 << 20, plane.now + MAX_WAIT_MS)
    assert not waited.on_older_segment(log)
    log.roll()
    plane.data.append(topic, 0, batch(records(1)), plane.now, 9, "test")
    # The high watermark moved on to the next segment: the fetch is behind, as Kafka's case F.
    assert plane.end_turn() == [(ticket, None)]


def _produce(name: str, data: bytes) -> Any:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=data)
    return ProduceRequest(
        version=9,
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=name, partition_data=[part])],
    )


def _waiting_fetch(name: str, offset: int, min_bytes: int) -> Any:
    fetch = fetch_request(11, [(name, [fetch_partition(0, offset)])])
    fetch.max_wait_ms = MAX_WAIT_MS
    fetch.min_bytes = min_bytes
    fetch.max_bytes = 50 << 20
    return fetch


def _fetched_bytes(answer: Any) -> int:
    return sum(len(p.records or b"") for t in answer.responses for p in t.partitions)


async def test_a_parked_fetch_counts_what_it_already_found() -> None:
    now = int(time.time() * 1000)
    first, second = (batch(records(8, p), timestamp=now) for p in "ab")
    with running(topics=[("lp", 1)]) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with (
            await ProtocolClient.connect(host, int(port)) as consumer,
            await ProtocolClient.connect(host, int(port)) as producer,
        ):
            answer = await producer.request(_produce("lp", first), 9)
            assert answer.responses[0].partition_responses[0].error_code == 0
            fetch = asyncio.ensure_future(
                consumer.request(_waiting_fetch("lp", 0, len(first) + len(second)), 11)
            )
            await asyncio.sleep(0.2)
            assert not fetch.done()  # fewer bytes than min_bytes: parked
            await producer.request(_produce("lp", second), 9)
            answer = await asyncio.wait_for(fetch, BOUND_S)
            assert _fetched_bytes(answer) == len(first) + len(second)


async def test_a_fetch_parked_on_a_topic_that_is_deleted_hears_it_is_unknown() -> None:
    # Kafka's DelayedFetch re-reads the partition and finds no such topic:
    # UNKNOWN_TOPIC_OR_PARTITION, not NOT_LEADER_OR_FOLLOWER (a leader moving elsewhere).
    from kafka.protocol.admin import DeleteTopicsRequest

    with running(topics=[("doomed", 1)]) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with (
            await ProtocolClient.connect(host, int(port)) as consumer,
            await ProtocolClient.connect(host, int(port)) as admin,
        ):
            fetch = asyncio.ensure_future(consumer.request(_waiting_fetch("doomed", 0, 1), 11))
            await asyncio.sleep(0.2)
            assert not fetch.done()
            state = DeleteTopicsRequest.DeleteTopicState
            deleted = await admin.request(
                DeleteTopicsRequest(
                    version=6, topics=[state(name="doomed", topic_id=None)], timeout_ms=5000
                ),
                6,
            )
            assert deleted.responses[0].error_code == 0
            answer = await asyncio.wait_for(fetch, BOUND_S)
    (partition,) = answer.responses[0].partitions
    assert partition.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


async def test_a_fetch_in_an_older_segment_is_answered_without_waiting() -> None:
    # Two segments: each 700 KB batch fills one of 1 MiB.
    now = int(time.time() * 1000)
    big = [batch([(b"k", bytes([i]) * 700_000)], timestamp=now) for i in range(2)]
    with running(topics=[("old", 1)]) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            await _set_segment_bytes(client, "old")
            for data in big:
                answer = await client.request(_produce("old", data), 9)
                assert answer.responses[0].partition_responses[0].error_code == 0
            started = time.monotonic()
            answer = await asyncio.wait_for(
                client.request(_waiting_fetch("old", 0, 10 << 20), 11), BOUND_S
            )
            # Only the first segment's batch, far below min_bytes, and no wait.
            assert _fetched_bytes(answer) == len(big[0])
            assert time.monotonic() - started < BOUND_S


async def _set_segment_bytes(client: ProtocolClient, topic: str) -> None:
    from datakit import incremental_alter

    answer = await client.request(
        incremental_alter(2, (topic, [("segment.bytes", 0, str(1 << 20))])), 1
    )
    assert answer.responses[0].error_code == 0


def test_librdkafka_with_fetch_min_bytes_catches_up_across_segments() -> None:
    with running(topics=[("catchup", 1)]) as s:
        asyncio.run(_configure(s.bootstrap, "catchup"))
        producer = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
        for i in range(3):
            producer.produce("catchup", key=b"k", value=bytes([i]) * 700_000)
            assert producer.flush(10) == 0
        del producer  # no reconnecting to a stopped server later
        consumer = Consumer(
            {
                "bootstrap.servers": s.bootstrap,
                "group.id": "catchup",
                "auto.offset.reset": "earliest",
                # Far more than the topic holds, and the longest wait librdkafka allows
                # past the test's bound: only a fetch that does not wait gets records.
                "fetch.min.bytes": 10_000_000,
                "fetch.wait.max.ms": 30_000,
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe(["catchup"])
            got: list[int] = []
            deadline = time.monotonic() + BOUND_S
            while len(got) < 2 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append(message.offset())
            # The records of the two older segments, read without waiting for min bytes.
            assert got[:2] == [0, 1]
        finally:
            consumer.close()


async def _configure(bootstrap: str, topic: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    async with await ProtocolClient.connect(host, int(port)) as client:
        await _set_segment_bytes(client, topic)
