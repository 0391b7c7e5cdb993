"""Capture real client traffic: stock clients talk to a server through a recording proxy."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Callable

from minicoord.testing import running

TOPIC = "topic6"


async def _proxy(
    target: list[int],
    frames: list[bytes],
    exchanges: list[tuple[bytes, bytes]] | None = None,
) -> tuple[asyncio.base_events.Server, int]:
    """A proxy to the port in `target` recording each request frame the clients send into
    `frames` and, when `exchanges` is given, each (request, response) pair, both framed,
    matched by connection and correlation id."""

    def cut(buf: bytearray) -> list[bytes]:
        out = []
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + size:
                break
            out.append(bytes(buf[: 4 + size]))
            del buf[: 4 + size]
        return out

    async def pipe(
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        record: Callable[[bytes], None],
    ) -> None:
        buf = bytearray()
        try:
            while data := await reader.read(65536):
                writer.write(data)
                buf += data
                for frame in cut(buf):
                    record(frame)
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target[0])
        pending: dict[int, bytes] = {}  # correlation id -> request, on this connection

        def request(frame: bytes) -> None:
            frames.append(frame)
            if exchanges is not None and len(frame) >= 12:
                pending[struct.unpack_from(">i", frame, 8)[0]] = frame

        def response(frame: bytes) -> None:
            if exchanges is not None and len(frame) >= 8:
                sent = pending.pop(struct.unpack_from(">i", frame, 4)[0], None)
                if sent is not None:
                    exchanges.append((sent, frame))

        await asyncio.gather(pipe(reader, up_writer, request), pipe(up_reader, writer, response))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"capture-ck-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "broker.address.family": "v4",
        }
    )
    assigned: list[object] = []
    consumer.subscribe([TOPIC], on_assign=lambda c, ps: assigned.extend(ps))
    deadline = time.monotonic() + 20
    while not assigned and time.monotonic() < deadline:
        consumer.poll(0.05)
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
    AdminClient({"bootstrap.servers": bootstrap}).list_consumer_groups().result(timeout=10)
    consumer.close()


def _confluent_data(bootstrap: str) -> None:
    """An idempotent producer, then a consumer reading back: Produce, Fetch, ListOffsets."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1}
    )
    for i in range(20):
        producer.produce(
            TOPIC,
            key=f"k{i}".encode(),
            value=b"v" * (i * 10),
            headers=[("h", b"x")],
            partition=i % 3,
        )
        if i % 5 == 4:
            producer.flush(10)
    producer.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"capture-read-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    # From the beginning, which the consumer looks up with ListOffsets.
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(3)])
    got = 0
    deadline = time.monotonic() + 20
    while got < 20 and time.monotonic() < deadline:
        got += len([m for m in consumer.consume(20, 0.2) if m.error() is None])
    consumer.close()


def _confluent_transactions(bootstrap: str) -> None:
    """A transactional producer: FindCoordinator for its id, InitProducerId,
    AddPartitionsToTxn, transactional Produce, AddOffsetsToTxn, TxnOffsetCommit and EndTxn
    (one transaction committed, one aborted); then a read_committed consumer (Fetch with the
    aborted transactions named, OffsetFetch with require_stable)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    quiet = logging.getLogger("librdkafka")
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "capture-tx", "logger": quiet}
    )
    producer.init_transactions(10)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "capture-tx-group"})
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, value=b"tx" * i, partition=i % 2)
        offsets = [TopicPartition(TOPIC, 3, 7)]
        producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    group.committed([TopicPartition(TOPIC, 3)], timeout=10)
    group.close()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "capture-tx-read",
            "isolation.level": "read_committed",
            "logger": quiet,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(2)])
    got = 0
    deadline = time.monotonic() + 10
    while got < 4 and time.monotonic() < deadline:
        got += len([m for m in consumer.consume(10, 0.2) if m.error() is None])
    consumer.close()


def _kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for _ in range(5):
        producer.send(TOPIC, key=b"kp", value=b"gzip me " * 20, headers=[("h", b"y")])
    producer.flush(10)
    producer.close()

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    listed = admin.list_groups()
    groups = [g["group_id"] if isinstance(g, dict) else g[0] for g in listed]
    if groups:
        admin.describe_groups(groups[:3])
        admin.list_group_offsets(groups[0])
    admin.close()


async def _aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    for i in range(5):
        await producer.send_and_wait(TOPIC, b"aio", key=b"ka", partition=i % 2)
    await producer.stop()

    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=f"capture-aio-{uuid.uuid4().hex[:6]}",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=100,
    )
    await consumer.start()
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        await consumer.getmany(timeout_ms=20)
    await consumer.commit({TopicPartition(TOPIC, 1): OffsetAndMetadata(0, "meta")})
    await consumer.committed(TopicPartition(TOPIC, 1))
    await consumer.stop()


def _confluent_consumer_protocol(bootstrap: str) -> None:
    """librdkafka with KIP-848's protocol (group.protocol=consumer): ConsumerGroupHeartbeat
    joining, reconciling (owned partitions acknowledged), committing, leaving (epoch -1) and
    leaving for now as a static member (-2); subscribing by regex; asking for the "range"
    assignor and for one that does not exist (an error answer with a message); and
    ConsumerGroupDescribe of a consumer group and of a missing one."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    group = f"capture-cgp-{uuid.uuid4().hex[:6]}"
    quiet = logging.getLogger("librdkafka")  # not librdkafka's stderr

    def consumer(**extra: object) -> Consumer:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "logger": quiet,
        }
        return Consumer({**config, **extra})

    dynamic = consumer(**{"group.remote.assignor": "range"})
    static = consumer(**{"group.instance.id": "capture-static", "client.rack": "rack-a"})
    dynamic.subscribe([TOPIC])
    static.subscribe([TOPIC])
    pattern = consumer(**{"group.id": group + "-regex"})
    pattern.subscribe(["^topic.*"])
    members = [dynamic, static, pattern]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for c in members:
            c.poll(0.02)
        sizes = [len(c.assignment()) for c in members]
        if sizes[0] + sizes[1] == 6 and all(sizes):
            break
    mine = dynamic.assignment()
    if mine:
        dynamic.commit(offsets=[TopicPartition(TOPIC, mine[0].partition, 1)], asynchronous=False)
    refused = consumer(**{"group.id": group + "-bad", "group.remote.assignor": "no-such"})
    refused.subscribe([TOPIC])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        msg = refused.poll(0.05)
        if msg is not None and msg.error() is not None:
            break
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    for future in admin.describe_consumer_groups([group, group + "-missing"]).values():
        future.result(timeout=10)
    for c in [dynamic, static, pattern, refused]:
        c.close()


async def capture_consumer_protocol_exchanges() -> tuple[list[tuple[bytes, bytes]], uuid.UUID]:
    """Every (request, response) pair, framed, of librdkafka's consumer-protocol session
    (`_confluent_consumer_protocol`), and the id of the topic its members subscribed to."""
    frames: list[bytes] = []
    exchanges: list[tuple[bytes, bytes]] = []
    target: list[int] = []
    proxy, port = await _proxy(target, frames, exchanges)
    bootstrap = f"127.0.0.1:{port}"
    configs = {"advertised.listeners": f"PLAINTEXT://{bootstrap}"}
    with running(configs, topics=[(TOPIC, 6)]) as server:
        target.append(server.port)
        topic_id = server.call(lambda: server.server.broker.topics.get(TOPIC).topic_id)
        try:
            await asyncio.wait_for(asyncio.to_thread(_confluent_consumer_protocol, bootstrap), 60)
        finally:
            proxy.close()
    return exchanges, topic_id


async def capture_client_frames() -> list[bytes]:
    """Frames (length prefix included) that four stock clients sent while producing,
    fetching, joining, committing, fetching offsets, leaving and administering groups, with
    both the classic and the consumer group protocol."""
    frames: list[bytes] = []
    target: list[int] = []
    proxy, port = await _proxy(target, frames)
    bootstrap = f"127.0.0.1:{port}"
    # The server advertises the proxy, so every connection the clients open goes through it.
    configs = {"advertised.listeners": f"PLAINTEXT://{bootstrap}"}
    with running(configs, topics=[(TOPIC, 6)]) as server:
        target.append(server.port)
        try:
            await asyncio.wait_for(_aiokafka(bootstrap), 60)
            await asyncio.wait_for(asyncio.to_thread(_confluent, bootstrap), 60)
            await asyncio.wait_for(asyncio.to_thread(_confluent_data, bootstrap), 60)
            await asyncio.wait_for(asyncio.to_thread(_confluent_transactions, bootstrap), 60)
            await asyncio.wait_for(asyncio.to_thread(_kafka_python, bootstrap), 60)
            await asyncio.wait_for(asyncio.to_thread(_confluent_consumer_protocol, bootstrap), 60)
        finally:
            proxy.close()
    return frames
