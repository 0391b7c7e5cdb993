"""Transactions through stock clients: each Python client's transactional producer commits
and aborts, read_committed consumers see only what committed, offsets sent to a transaction
become the group's when it commits, an open transaction holds read_committed readers back,
a second producer of the same transactional id fences the first, and a transaction left open
past its timeout is aborted.

Each check is what Kafka does for the same calls (TransactionCoordinator, transaction
version 1; read_committed Fetch below the last stable offset with the aborted transactions
named).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import AbortTransactionSpec
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.structs import TopicPartition as KpTopicPartition
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import EmbeddedServer, running

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

TOPIC = "txn-out"
SOURCE = "txn-in"
PARTITIONS = 3
CALL_S = 15


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    with running(
        configs={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200},
        topics=[(TOPIC, PARTITIONS), (SOURCE, PARTITIONS)],
    ) as s:
        yield s


def confluent_read(bootstrap: str, isolation: str, expect: int, quiet_s: float = 1.0) -> list[str]:
    """Every value of TOPIC a confluent-kafka consumer with `isolation` reads: polled until
    `expect` have come and then `quiet_s` more, so that extra records would be seen."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: list[str] = []
    deadline = time.monotonic() + CALL_S
    quiet_until = None
    try:
        for _ in range(1000):
            now = time.monotonic()
            if now > deadline or (quiet_until is not None and now > quiet_until):
                break
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message.value().decode())
            if len(got) >= expect and quiet_until is None:
                quiet_until = time.monotonic() + quiet_s
        if len(got) >= expect and quiet_until is None:
            time.sleep(quiet_s)
    finally:
        consumer.close()
    return sorted(got)


def confluent_producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})
    producer.init_transactions(CALL_S)
    return producer


def test_confluent_commit_abort_and_offsets(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap
    producer = confluent_producer(bootstrap, "cf-1")
    producer.begin_transaction()
    for i in range(9):
        producer.produce(TOPIC, value=f"c{i}".encode(), partition=i % PARTITIONS)
    producer.commit_transaction(CALL_S)

    producer.begin_transaction()
    for i in range(6):
        producer.produce(TOPIC, value=f"a{i}".encode(), partition=i % PARTITIONS)
    producer.flush(CALL_S)
    producer.abort_transaction(CALL_S)

    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "cf-group"})
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"d0", partition=0)
    offsets = [TopicPartition(SOURCE, 1, 42), TopicPartition(SOURCE, 2, 7)]
    producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), CALL_S)
    producer.commit_transaction(CALL_S)

    committed = [f"c{i}" for i in range(9)] + ["d0"]
    assert confluent_read(bootstrap, "read_committed", 10) == sorted(committed)
    every = committed + [f"a{i}" for i in range(6)]
    assert confluent_read(bootstrap, "read_uncommitted", 16) == sorted(every)
    got = group.committed([TopicPartition(SOURCE, p) for p in range(PARTITIONS)], CALL_S)
    assert [(tp.partition, tp.offset) for tp in got] == [(0, -1001), (1, 42), (2, 7)]
    group.close()


def test_aborted_offsets_never_become_the_groups(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap
    producer = confluent_producer(bootstrap, "cf-offsets")
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "cf-aborted"})
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"x", partition=1)
    metadata = group.consumer_group_metadata()
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 5)], metadata, CALL_S)
    producer.abort_transaction(CALL_S)
    got = group.committed([TopicPartition(SOURCE, 0)], CALL_S)
    assert got[0].offset == -1001  # nothing committed
    group.close()


def test_an_open_transaction_holds_read_committed_readers_back(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(TOPIC, value=b"before", partition=0)
    plain.flush(CALL_S)
    producer = confluent_producer(bootstrap, "cf-open")
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"open", partition=0)
    producer.flush(CALL_S)
    # A plain record after the open transaction's: below the high watermark, above the LSO.
    plain.produce(TOPIC, value=b"after", partition=0)
    plain.flush(CALL_S)

    assert confluent_read(bootstrap, "read_committed", 1) == ["before"]
    assert confluent_read(bootstrap, "read_uncommitted", 3) == ["after", "before", "open"]
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
    )
    low, high = reader.get_watermark_offsets(TopicPartition(TOPIC, 0), CALL_S)
    assert (low, high) == (0, 1)  # read_committed: the end is the last stable offset
    producer.commit_transaction(CALL_S)
    assert confluent_read(bootstrap, "read_committed", 3) == ["after", "before", "open"]
    reader.close()


def test_a_second_producer_of_the_id_fences_the_first(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap
    first = confluent_producer(bootstrap, "cf-zombie")
    first.begin_transaction()
    first.produce(TOPIC, value=b"zombie", partition=2)
    first.flush(CALL_S)
    # The new producer's InitProducerId bumps the epoch and aborts the open transaction.
    second = confluent_producer(bootstrap, "cf-zombie")
    second.begin_transaction()
    second.produce(TOPIC, value=b"live", partition=2)
    second.commit_transaction(CALL_S)
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(CALL_S)
    assert fenced.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), fenced.value
    assert confluent_read(bootstrap, "read_committed", 1) == ["live"]
    # As Kafka: the fence epoch (1) went to the abort markers only; the new producer was told
    # CONCURRENT_TRANSACTIONS and its retry got the epoch after it.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="txn-fence")
    try:
        described = admin.describe_transactions(["cf-zombie"])["cf-zombie"]
    finally:
        admin.close()
    assert (described.state, described.producer_epoch) == ("CompleteCommit", 2), described


def test_a_transaction_past_its_timeout_is_aborted(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap
    producer = confluent_producer(bootstrap, "cf-slow", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"slow", partition=1)
    producer.flush(CALL_S)
    # The coordinator aborts it within timeout + cleanup interval, under a bumped epoch
    # (the producer is fenced), and the LSO moves past it.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="txn-timeout")
    deadline = time.monotonic() + 10
    described = None
    try:
        for _ in range(100):
            described = admin.describe_transactions(["cf-slow"])["cf-slow"]
            if described.state == "CompleteAbort" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        admin.close()
    assert described is not None and described.state == "CompleteAbort", described
    assert described.producer_epoch == 1, described
    with pytest.raises(KafkaException):
        producer.commit_transaction(CALL_S)
    assert confluent_read(bootstrap, "read_committed", 0, quiet_s=0.5) == []
    assert confluent_read(bootstrap, "read_uncommitted", 1) == ["slow"]


def test_admin_clients_list_and_describe_transactions(server: EmbeddedServer) -> None:
    producer = confluent_producer(server.bootstrap, "listed-1")
    producer.begin_transaction()
    # A record from an hour ago: the producer's last timestamp after the commit is the
    # marker's, not its batch's (Kafka's appendEndTxnMarker sets it).
    written = int(time.time() * 1000) - 3_600_000
    producer.produce(TOPIC, value=b"v", partition=0, timestamp=written)
    producer.flush(CALL_S)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="txn-admin")
    try:
        listed = admin.list_transactions(state_filters=["Ongoing"])
        assert [(t.transactional_id, t.state) for t in listed[0]] == [("listed-1", "Ongoing")]
        described = admin.describe_transactions(["listed-1"])["listed-1"]
        assert described.state == "Ongoing", described
        assert described.producer_id == listed[0][0].producer_id
        assert described.topic_partitions == {KpTopicPartition(TOPIC, 0)}, described
        assert described.transaction_start_time_ms > 0
        producer.commit_transaction(CALL_S)
        assert admin.list_transactions(state_filters=["Ongoing"]) == {0: []}
        completed = admin.describe_transactions(["listed-1"])["listed-1"]
        assert (completed.state, completed.topic_partitions) == ("CompleteCommit", set())
        # Kafka keeps the finished transaction's start time (only a new id has none).
        assert completed.transaction_start_time_ms == described.transaction_start_time_ms
        tp = KpTopicPartition(TOPIC, 0)
        (state,) = admin.describe_producers([tp])[tp].active_producers
        # The coordinator's marker: its epoch (0 on this node), its time, no transaction open.
        assert (state.producer_id, state.coordinator_epoch) == (described.producer_id, 0)
        assert state.current_transaction_start_offset == -1
        assert state.last_timestamp >= described.transaction_start_time_ms > written
    finally:
        admin.close()


def test_aiokafka_transactions(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap

    async def run() -> tuple[list[str], list[str], int | None]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send_and_wait(TOPIC, f"c{i}".encode(), partition=i % 3)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait(TOPIC, b"a0", partition=0)
                    raise RuntimeError("abort")
            async with producer.transaction():
                await producer.send_and_wait(TOPIC, b"d0", partition=1)
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition(SOURCE, 1): 9}, "aio-group"
                )
        finally:
            await producer.stop()
        read = []
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                isolation_level=isolation,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await consumer.start()
            consumer.assign([AioTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            values: list[str] = []
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                values += [m.value.decode() for ms in batches.values() for m in ms]
            await consumer.stop()
            read.append(sorted(values))
        group = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-group")
        await group.start()
        committed = await group.committed(AioTopicPartition(SOURCE, 1))
        await group.stop()
        return read[0], read[1], committed

    committed_read, uncommitted_read, offset = asyncio.run(run())
    assert committed_read == ["c0", "c1", "c2", "c3", "d0"]
    assert uncommitted_read == ["a0", "c0", "c1", "c2", "c3", "d0"]
    assert offset == 9


def test_kafka_python_transactions(server: EmbeddedServer) -> None:
    bootstrap = server.bootstrap
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-1")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(TOPIC, f"c{i}".encode(), partition=i)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(TOPIC, b"a0", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    read = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level=isolation,
            auto_offset_reset="earliest",
            consumer_timeout_ms=2000,
        )
        consumer.assign([KpTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        read[isolation] = sorted(m.value.decode() for m in consumer)
        consumer.close()
    assert read["read_committed"] == ["c0", "c1", "c2"]
    assert read["read_uncommitted"] == ["a0", "c0", "c1", "c2"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_confluent_consume_transform_produce_exactly_once(
    server: EmbeddedServer, protocol: str
) -> None:
    # The exactly-once loop: a group member reads SOURCE, writes each record transformed to
    # TOPIC and sends its position to the same transaction (TxnOffsetCommit with its
    # generation, or its KIP-848 member epoch); committed, the output and the group's offsets
    # move together.
    bootstrap = server.bootstrap
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        source.produce(SOURCE, value=f"m{i}".encode(), partition=i % PARTITIONS)
    source.flush(CALL_S)
    group_id = f"eos-{protocol}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([SOURCE])
    producer = confluent_producer(bootstrap, f"eos-{protocol}")
    moved = 0
    deadline = time.monotonic() + 30
    for _ in range(300):
        if moved >= 30 or time.monotonic() > deadline:
            break
        batch = consumer.consume(10, 0.5)
        records = [m for m in batch if m.error() is None]
        if not records:
            continue
        producer.begin_transaction()
        for m in records:
            producer.produce(TOPIC, value=m.value().upper(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), CALL_S)
        producer.commit_transaction(CALL_S)
        moved += len(records)
    assert moved == 30
    consumer.close()
    assert confluent_read(bootstrap, "read_committed", 30) == sorted(f"M{i}" for i in range(30))
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    committed = check.committed([TopicPartition(SOURCE, p) for p in range(PARTITIONS)], CALL_S)
    assert [tp.offset for tp in committed] == [10, 10, 10]
    check.close()


def test_offsets_of_an_open_transaction_are_unstable_until_it_commits(
    server: EmbeddedServer,
) -> None:
    # OffsetFetch with require_stable (KIP-447, what read_committed consumers send) answers
    # UNSTABLE_OFFSET_COMMIT for a partition an open transaction committed an offset of;
    # without it, the group's committed offset as it stands.
    producer = confluent_producer(server.bootstrap, "unstable")
    group = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unstable-group"})
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"v", partition=0)
    metadata = group.consumer_group_metadata()
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, 1, 33)], metadata, CALL_S)

    async def fetch(stable: bool) -> list[tuple[int, int, int]]:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "unstable-test")
        try:
            topic = OffsetFetchRequest.OffsetFetchRequestTopic(
                name=SOURCE, partition_indexes=[0, 1]
            )
            request = OffsetFetchRequest(
                version=7, group_id="unstable-group", topics=[topic], require_stable=stable
            )
            answer = await asyncio.wait_for(client.request(request, 7), CALL_S)
        finally:
            await client.close()
        return [
            (p.partition_index, p.committed_offset, p.error_code)
            for t in answer.topics
            for p in t.partitions
        ]

    unstable = ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert asyncio.run(fetch(True)) == [(0, -1, 0), (1, -1, unstable)]
    assert asyncio.run(fetch(False)) == [(0, -1, 0), (1, -1, 0)]
    producer.commit_transaction(CALL_S)
    assert asyncio.run(fetch(True)) == [(0, -1, 0), (1, 33, 0)]
    group.close()


def test_an_admin_aborts_a_hanging_transaction(server: EmbeddedServer) -> None:
    # KIP-664's tooling: find the open transaction's producer on the partition
    # (DescribeProducers), abort it there (WriteTxnMarkers); read_committed readers go on.
    producer = confluent_producer(server.bootstrap, "hanging")
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"hung", partition=2)
    producer.flush(CALL_S)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="txn-abort")
    try:
        tp = KpTopicPartition(TOPIC, 2)
        (state,) = admin.describe_producers([tp])[tp].active_producers
        # No marker yet: no coordinator epoch; the open transaction from offset 0.
        assert (state.coordinator_epoch, state.current_transaction_start_offset) == (-1, 0)
        admin.abort_transaction(
            AbortTransactionSpec(tp, state.producer_id, state.producer_epoch, -1)
        )
        (after,) = admin.describe_producers([tp])[tp].active_producers
        # The admin's marker carried coordinator epoch -1, as Java's admin sends it.
        assert (after.coordinator_epoch, after.current_transaction_start_offset) == (-1, -1)
    finally:
        admin.close()
    assert confluent_read(server.bootstrap, "read_committed", 0, quiet_s=0.5) == []
    assert confluent_read(server.bootstrap, "read_uncommitted", 1) == ["hung"]


def test_aiokafka_exactly_once_with_the_group_id_alone(server: EmbeddedServer) -> None:
    # aiokafka's send_offsets_to_transaction takes a group id only: TxnOffsetCommit v0, with
    # no member id or generation, while the group has a member. Kafka takes it
    # (ClassicGroup.validateOffsetCommit, transactional), so aiokafka's exactly-once loop works.
    bootstrap = server.bootstrap

    async def run() -> tuple[int, int | None]:
        source = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await source.start()
        for i in range(6):
            await source.send_and_wait(SOURCE, f"m{i}".encode(), partition=0)
        await source.stop()
        consumer = AIOKafkaConsumer(
            SOURCE,
            bootstrap_servers=bootstrap,
            group_id="aio-eos",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-eos")
        await consumer.start()
        await producer.start()
        moved = 0
        try:
            deadline = time.monotonic() + 20
            while moved < 6 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=300)
                for tp, messages in batches.items():
                    async with producer.transaction():
                        for m in messages:
                            await producer.send_and_wait(TOPIC, m.value.upper(), partition=0)
                        await producer.send_offsets_to_transaction(
                            {tp: messages[-1].offset + 1}, "aio-eos"
                        )
                    moved += len(messages)
            committed = await consumer.committed(AioTopicPartition(SOURCE, 0))
        finally:
            await producer.stop()
            await consumer.stop()
        return moved, committed

    moved, committed = asyncio.run(run())
    assert (moved, committed) == (6, 6)
    assert confluent_read(bootstrap, "read_committed", 6) == sorted(f"M{i}" for i in range(6))
