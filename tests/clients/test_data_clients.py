"""The data path through each stock Python client: produce keyed messages with headers, read
them back through a consumer group, commit, and check the offsets.

Each client's own idempotent producer writes to the 6-partition topic (confluent-kafka with
`enable.idempotence`, aiokafka with `enable_idempotence`, kafka-python by its 3.x default),
once uncompressed and once with a codec. A single-member group of the same client reads
everything back; `deliverykit.check_delivery` requires every message with its key, value and
headers, in produce order per partition, at the offset its delivery report named. After a
synchronous commit the group's offsets, read back through the client's admin API
(OffsetFetch), must equal the partitions' end offsets from ListOffsets.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition as AioTopicPartition
from clientkit import (
    HEARTBEAT_MS,
    METADATA_MAX_AGE_MS,
    PARTITIONS,
    SESSION_MS,
    TOPIC,
    async_wait_until,
    wait_until,
)
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from deliverykit import Consumed, check_delivery, keyed_messages
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition as KpTopicPartition

pytestmark = pytest.mark.clients

MESSAGES = 600
# How long a consumer keeps polling after it has everything, to see that nothing more comes.
QUIET_S = 0.5
CALL_TIMEOUT_S = 20


def expect_no_more(poll: Callable[[], int]) -> None:
    """Poll for QUIET_S: a record beyond the produced ones (a duplicate) fails the test."""
    deadline = time.monotonic() + QUIET_S
    for _ in range(1000):
        extra = poll()
        assert extra == 0, f"{extra} records arrived after every produced one had"
        if time.monotonic() >= deadline:
            return


# -- confluent-kafka --------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_confluent_round_trip(server: Any, group_id: str, compression: str) -> None:
    produced = keyed_messages(MESSAGES, tag=f"ck-{compression}")
    reports: list[tuple[int, int] | None] = [None] * len(produced)
    failures: list[str] = []
    eos: list[dict[str, Any]] = []

    def delivered(index: int) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failures.append(f"message {index}: {err}")
            else:
                reports[index] = (msg.partition(), msg.offset())

        return report

    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "client.id": "ck-producer",
            "enable.idempotence": True,
            "compression.type": compression,
            "linger.ms": 5,
            # librdkafka's statistics are the one place it shows its producer id and state.
            "statistics.interval.ms": 100,
            "stats_cb": lambda raw: eos.append(json.loads(raw).get("eos", {})),
        }
    )
    for i, message in enumerate(produced):
        producer.produce(
            TOPIC,
            key=message.key,
            value=message.value,
            headers=list(message.headers),
            on_delivery=delivered(i),
        )
        producer.poll(0)
    assert producer.flush(CALL_TIMEOUT_S) == 0, "messages left undelivered"
    assert not failures, failures[:5]
    idempotent = wait_until(
        lambda: next((e for e in reversed(eos) if e.get("idemp_state") == "Assigned"), None),
        5,
        tick=lambda: producer.poll(0.05),
        interval=0,
        describe=lambda: f"last eos stats: {eos[-1:]}",
        what="the idempotent producer to hold a producer id",
    )
    assert idempotent["producer_id"] >= 0 and idempotent["producer_epoch"] >= 0, idempotent

    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id,
            "client.id": "ck-consumer",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    admin = AdminClient({"bootstrap.servers": server.bootstrap, "client.id": "ck-admin"})
    try:
        consumer.subscribe([TOPIC])
        got: list[Consumed] = []

        def take() -> int:
            batch = consumer.consume(num_messages=500, timeout=0.1)
            for msg in batch:
                assert msg.error() is None, msg.error()
                headers = tuple(msg.headers() or ())
                got.append(Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(), headers))
            return len(batch)

        wait_until(
            lambda: take() >= 0 and len(got) >= len(produced),
            30,
            interval=0,
            describe=lambda: f"consumed {len(got)} of {len(produced)}",
            what="every message to be consumed",
        )
        expect_no_more(take)
        ends = check_delivery(produced, got, PARTITIONS, [r for r in reports if r is not None])

        committed = consumer.commit(asynchronous=False)
        assert committed is not None
        assert {tp.partition: tp.offset for tp in committed} == ends
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()
    producer.flush(CALL_TIMEOUT_S)

    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    listed = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=10)
    latest = {tp.partition: f.result(CALL_TIMEOUT_S).offset for tp, f in listed.items()}
    listed = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps}, request_timeout=10)
    earliest = {tp.partition: f.result(CALL_TIMEOUT_S).offset for tp, f in listed.items()}
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id, tps)], request_timeout=10
    )
    group_offsets = futures[group_id].result(CALL_TIMEOUT_S)
    assert {tp.partition: tp.offset for tp in group_offsets.topic_partitions} == latest == ends
    assert earliest == dict.fromkeys(range(PARTITIONS), 0)


# -- aiokafka ---------------------------------------------------------------------------------


async def bounded(awaitable: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


@pytest.mark.parametrize("compression", [None, "lz4"])
async def test_aiokafka_round_trip(server: Any, group_id: str, compression: str | None) -> None:
    produced = keyed_messages(MESSAGES, tag=f"aio-{compression}")
    producer = AIOKafkaProducer(
        bootstrap_servers=server.bootstrap,
        client_id="aio-producer",
        enable_idempotence=True,
        compression_type=compression,
        linger_ms=5,
    )
    await bounded(producer.start())
    try:
        # send() only queues (in call order); the futures resolve once the batches are acked.
        futures = [
            await bounded(producer.send(TOPIC, m.value, key=m.key, headers=list(m.headers)))
            for m in produced
        ]
        metas = await bounded(asyncio.gather(*futures))
        # aiokafka has no public accessor for the producer id InitProducerId gave it.
        txn = producer._txn_manager
        assert txn is not None and txn.producer_id >= 0, "the producer is not idempotent"
    finally:
        await bounded(producer.stop())
    reports = [(md.partition, md.offset) for md in metas]

    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=server.bootstrap,
        group_id=group_id,
        client_id="aio-consumer",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        metadata_max_age_ms=METADATA_MAX_AGE_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="aio-admin")
    await bounded(consumer.start())
    await bounded(admin.start())
    try:
        got: list[Consumed] = []

        async def take() -> int:
            batches = await bounded(consumer.getmany(timeout_ms=100, max_records=500))
            count = 0
            for records in batches.values():
                for r in records:
                    headers = tuple((k, bytes(v)) for k, v in r.headers)
                    got.append(Consumed(r.partition, r.offset, r.key, r.value, headers))
                    count += 1
            return count

        async def all_in() -> bool:
            await take()
            return len(got) >= len(produced)

        await async_wait_until(
            all_in,
            30,
            interval=0,
            describe=lambda: f"consumed {len(got)} of {len(produced)}",
            what="every message to be consumed",
        )
        deadline = time.monotonic() + QUIET_S
        for _ in range(1000):
            assert await take() == 0, "records arrived after every produced one had"
            if time.monotonic() >= deadline:
                break
        ends = check_delivery(produced, got, PARTITIONS, reports)

        await bounded(consumer.commit())
        tps = [AioTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        latest = await bounded(consumer.end_offsets(tps))
        earliest = await bounded(consumer.beginning_offsets(tps))
        group_offsets = await bounded(admin.list_consumer_group_offsets(group_id))
    finally:
        await bounded(consumer.stop())
        await bounded(admin.close())
    assert {tp.partition: om.offset for tp, om in group_offsets.items()} == ends
    assert {tp.partition: o for tp, o in latest.items()} == ends
    assert {tp.partition: o for tp, o in earliest.items()} == dict.fromkeys(range(PARTITIONS), 0)


# -- kafka-python -----------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "snappy"])
def test_kafka_python_round_trip(server: Any, group_id: str, compression: str | None) -> None:
    produced = keyed_messages(MESSAGES, tag=f"kp-{compression}")
    # No enable_idempotence: kafka-python 3.x turns it on by default (KIP-679), and that
    # default is what is under test.
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap,
        client_id="kp-producer",
        compression_type=compression,
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(TOPIC, key=m.key, value=m.value, headers=list(m.headers))
            for m in produced
        ]
        producer.flush(CALL_TIMEOUT_S)
        metas = [f.get(timeout=CALL_TIMEOUT_S) for f in futures]
        txn = producer._transaction_manager
        assert txn is not None, "kafka-python did not enable idempotence by default"
        assert txn.producer_id_and_epoch.producer_id >= 0, txn.producer_id_and_epoch
    finally:
        producer.close(timeout=CALL_TIMEOUT_S)
    reports = [(md.partition, md.offset) for md in metas]

    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=group_id,
        client_id="kp-consumer",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        metadata_max_age_ms=METADATA_MAX_AGE_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="kp-admin")
    try:
        consumer.subscribe([TOPIC])
        # A metadata refresh before the first poll: see test_kafka_python.Member for the
        # kafka-python 3.0.12 join race this avoids.
        assert TOPIC in consumer.topics()
        got: list[Consumed] = []

        def take() -> int:
            count = 0
            for records in consumer.poll(timeout_ms=100, max_records=500).values():
                for r in records:
                    headers = tuple((k, bytes(v)) for k, v in r.headers)
                    got.append(Consumed(r.partition, r.offset, r.key, r.value, headers))
                    count += 1
            return count

        wait_until(
            lambda: take() >= 0 and len(got) >= len(produced),
            30,
            interval=0,
            describe=lambda: f"consumed {len(got)} of {len(produced)}",
            what="every message to be consumed",
        )
        expect_no_more(take)
        ends = check_delivery(produced, got, PARTITIONS, reports)

        consumer.commit()
        tps = [KpTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        latest = consumer.end_offsets(tps)
        earliest = consumer.beginning_offsets(tps)
        group_offsets = admin.list_group_offsets(group_id)[group_id]
    finally:
        consumer.close()
        admin.close()
    assert {tp.partition: om.offset for tp, om in group_offsets.items()} == ends
    assert {tp.partition: o for tp, o in latest.items()} == ends
    assert {tp.partition: o for tp, o in earliest.items()} == dict.fromkeys(range(PARTITIONS), 0)


def test_min_insync_replicas_refuses_acks_all_as_kafka() -> None:
    # One node is every partition's only in-sync replica: a topic asking for two refuses an
    # acks=all produce with NOT_ENOUGH_REPLICAS (retriable; here retries are off), and takes
    # acks=1, as Kafka's Partition.appendRecordsToLeader decides.
    from minicoord.testing.embedded import running

    with running() as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        new = NewTopic("isr2", 1, 1, config={"min.insync.replicas": "2"})
        admin.create_topics([new])["isr2"].result(10)
        outcomes: dict[str, Any] = {}
        for acks in ("all", "1"):
            producer = Producer(
                {
                    "bootstrap.servers": server.bootstrap,
                    "acks": acks,
                    "retries": 0,
                    "enable.idempotence": False,
                    "message.timeout.ms": 5000,
                }
            )
            producer.produce(
                "isr2", b"v", on_delivery=lambda err, msg, acks=acks: outcomes.update({acks: err})
            )
            assert producer.flush(10) == 0
        assert outcomes["all"] is not None
        assert outcomes["all"].code() == KafkaError.NOT_ENOUGH_REPLICAS
        assert outcomes["1"] is None
