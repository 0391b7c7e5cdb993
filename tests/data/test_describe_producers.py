"""DescribeProducers (key 61, KIP-664): each partition's active idempotent producers, as
Kafka's KafkaApis.handleDescribeProducersRequest and UnifiedLog.activeProducers answer. A
stock admin client (kafka-python's describe_producers) over TCP after a stock idempotent
producer; raw requests for the fields, the per-topic and per-partition errors in Kafka's
order and words, the state after a restart, and Read on the topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from authzkit import authorized_client
from datakit import batch, records
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.errors import TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.producer import ProduceRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

TS = 1_700_000_000_000
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
UNKNOWN_WORDS = "This server does not host this topic-partition."
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
INVALID = ErrorCode.INVALID_TOPIC_EXCEPTION

# (partition, error code, error message, [(pid, epoch, last seq, last ts, coord epoch, txn)])
Answer = tuple[int, int, str | None, list[tuple[int, ...]]]


async def describe(client: ProtocolClient, *asked: tuple[str, list[int]]) -> dict[str, Any]:
    """{topic: [Answer per partition]} (a topic named twice: the answers of both, in order)."""
    topic = DescribeProducersRequest.TopicRequest
    request = DescribeProducersRequest(
        version=0, topics=[topic(name=n, partition_indexes=p) for n, p in asked]
    )
    response = await asyncio.wait_for(client.request(request, 0), 5)
    out: dict[str, Any] = {}
    for t in response.topics:
        out.setdefault(t.name, []).extend(
            (
                p.partition_index,
                p.error_code,
                p.error_message,
                [
                    (
                        s.producer_id,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                        s.coordinator_epoch,
                        s.current_txn_start_offset,
                    )
                    for s in p.active_producers
                ],
            )
            for p in t.partitions
        )
    return out


async def produce(
    client: ProtocolClient, topic: str, partition: int, data: bytes, error: int = 0
) -> None:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=data)
    topic_data = ProduceRequest.TopicProduceData(name=topic, partition_data=[part])
    request = ProduceRequest(
        version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[topic_data]
    )
    response = await asyncio.wait_for(client.request(request, 9), 5)
    assert response.responses[0].partition_responses[0].error_code == error, response


def idempotent(n: int, pid: int, epoch: int, seq: int, ts: int = TS) -> bytes:
    return batch(records(n), producer_id=pid, epoch=epoch, sequence=seq, timestamp=ts)


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="describe-producers", request_timeout_ms=10_000
    )


def test_a_stock_admin_client_sees_a_stock_idempotent_producer() -> None:
    with running(topics=[("orders", 2)]) as s:
        producer = KafkaProducer(bootstrap_servers=s.bootstrap, enable_idempotence=True)
        try:
            for i in range(5):
                producer.send("orders", value=b"v%d" % i, partition=0, timestamp_ms=TS + i)
            producer.flush(10)
            pid = producer._transaction_manager.producer_id_and_epoch.producer_id
        finally:
            producer.close(timeout=10)
        client = admin(s.bootstrap)
        try:
            described = client.describe_producers(
                [TopicPartition("orders", 0), TopicPartition("orders", 1)]
            )
            assert described[TopicPartition("orders", 1)].active_producers == []
            (state,) = described[TopicPartition("orders", 0)].active_producers
            # Five records, sequences 0-4; the last batch's largest timestamp.
            assert tuple(state) == (pid, 0, 4, TS + 4, -1, -1)
            with pytest.raises(UnknownTopicOrPartitionError):
                client.describe_producers([TopicPartition("orders", 2)], broker_id=0)
        finally:
            client.close()


async def test_each_partition_lists_its_producers_by_id_with_their_last_batch(
    raw_client: ProtocolClient,
) -> None:
    await produce(raw_client, "topic6", 1, idempotent(3, 9001, 0, 0, TS))
    await produce(raw_client, "topic6", 1, idempotent(2, 9000, 4, 0, TS + 50))
    await produce(raw_client, "topic6", 1, idempotent(2, 9001, 0, 3, TS + 7))
    await produce(raw_client, "topic6", 2, idempotent(1, 9000, 4, 0, TS + 9))
    # A plain producer (no producer id) is not tracked, as in Kafka.
    await produce(raw_client, "topic6", 3, batch(records(2), timestamp=TS))
    assert await describe(raw_client, ("topic6", [1, 2, 3, 0])) == {
        "topic6": [
            (1, 0, None, [(9000, 4, 1, TS + 50, -1, -1), (9001, 0, 4, TS + 7, -1, -1)]),
            (2, 0, None, [(9000, 4, 0, TS + 9, -1, -1)]),
            (3, 0, None, []),
            (0, 0, None, []),
        ]
    }
    # A new epoch starts the producer's sequence again; its last batch is what is shown.
    await produce(raw_client, "topic6", 2, idempotent(4, 9000, 5, 0, TS + 1))
    assert await describe(raw_client, ("topic6", [2])) == {
        "topic6": [(2, 0, None, [(9000, 5, 3, TS + 1, -1, -1)])]
    }


async def test_unknown_and_illegal_topics_and_partitions_are_kafkas_errors(
    raw_client: ProtocolClient,
) -> None:
    long_name = "x" * 250
    answered = await describe(
        raw_client,
        ("topic6", [6, -1, 0]),
        ("missing", [0, 1]),
        ("", [0]),
        ("..", [0]),
        ("a b", [3]),
        (long_name, [0]),
        ("topic6", [5]),
    )
    assert answered == {
        # A partition the topic lacks: ReplicaManager's bare code, no message.
        "topic6": [
            (6, UNKNOWN, None, []),
            (-1, UNKNOWN, None, []),
            (0, 0, None, []),
            (5, 0, None, []),
        ],
        "missing": [(0, UNKNOWN, UNKNOWN_WORDS, []), (1, UNKNOWN, UNKNOWN_WORDS, [])],
        "": [(0, INVALID, "Topic name is invalid: the empty string is not allowed", [])],
        "..": [(0, INVALID, "Topic name is invalid: '..' is not allowed", [])],
        "a b": [
            (
                3,
                INVALID,
                "Topic name is invalid: 'a b' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'",
                [],
            )
        ],
        long_name: [
            (
                0,
                INVALID,
                f"Topic name is invalid: the length of '{long_name}' is longer than the max "
                "allowed length 249",
                [],
            )
        ],
    }
    # No partitions asked: the topic is answered, with none.
    assert await describe(raw_client, ("topic6", []), ("missing", [])) == {
        "topic6": [],
        "missing": [],
    }


async def test_producers_come_back_after_a_restart(tmp_path: Path) -> None:
    # Recent timestamps: a producer whose last batch is producer.id.expiration.ms old is
    # forgotten when its partition loads, as Kafka forgets it.
    now = int(time.time() * 1000)

    def ask() -> dict[TopicPartition, Any]:
        client = admin(s.bootstrap)
        try:
            return client.describe_producers([TopicPartition("t", 0)])
        finally:
            client.close()

    with running(topics=[("t", 1)], data_dir=tmp_path) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            await produce(client, "t", 0, idempotent(3, 77, 2, 0, now))
            await produce(client, "t", 0, idempotent(2, 77, 2, 3, now + 3))
        before = await asyncio.to_thread(ask)
    with running(data_dir=tmp_path) as s:
        after = await asyncio.to_thread(ask)
    assert [tuple(p) for p in before[TopicPartition("t", 0)].active_producers] == [
        (77, 2, 4, now + 3, -1, -1)
    ]
    assert after == before


async def test_a_transaction_marker_sets_the_last_timestamp_across_a_restart(
    tmp_path: Path,
) -> None:
    # Kafka's ProducerAppendInfo.appendEndTxnMarker sets the producer's last timestamp to the
    # marker's; a restart reads it back from the marker (or the snapshot) in the log.
    written = int(time.time() * 1000) - 60_000

    def ask(s: Any) -> list[tuple[int, ...]]:
        client = admin(s.bootstrap)
        try:
            described = client.describe_producers([TopicPartition("t", 0)])
        finally:
            client.close()
        return [tuple(p) for p in described[TopicPartition("t", 0)].active_producers]

    with running(topics=[("t", 1)], data_dir=tmp_path) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            await produce(client, "t", 0, idempotent(2, 88, 1, 0, written))
        plane = s.server.broker.data
        state = plane.partitions[("t", 0)]
        marker_at = written + 30_000
        s.call(lambda: plane.write_marker(state, 88, 1, False, marker_at))
        before = await asyncio.to_thread(ask, s)
    with running(data_dir=tmp_path) as s:
        after = await asyncio.to_thread(ask, s)
    assert before == [(88, 1, 1, marker_at, 0, -1)]
    assert after == before


@pytest.fixture
async def acl_client(request: pytest.FixtureRequest) -> AsyncIterator[ProtocolClient]:
    async with authorized_client(request.param, [("secret", 2), ("open", 1)]) as client:
        yield client


WORDS = "Topic authorization failed."


@pytest.mark.parametrize(
    ("acl_client", "absent"),
    [
        (("allow User:ANONYMOUS Read topic:open",), (DENIED, WORDS)),
        (
            ("allow User:ANONYMOUS Read topic:open", "allow User:ANONYMOUS Describe topic:*"),
            (DENIED, WORDS),
        ),
        (
            ("allow User:ANONYMOUS All topic:*", "deny User:ANONYMOUS Read topic:secret"),
            (UNKNOWN, UNKNOWN_WORDS),
        ),
    ],
    ids=["read-on-another-topic", "describe-is-not-enough", "read-denied"],
    indirect=["acl_client"],
)
async def test_read_on_the_topic_is_needed(
    acl_client: ProtocolClient, absent: tuple[int, str]
) -> None:
    assert await describe(
        acl_client, ("secret", [0, 1]), ("open", [0]), ("absent", [0]), ("", [0])
    ) == {
        "secret": [(0, DENIED, WORDS, []), (1, DENIED, WORDS, [])],
        "open": [(0, 0, None, [])],
        # Read is checked before existence, so a topic one may not read is not revealed
        # to be missing; an illegal name is refused before either.
        "absent": [(0, *absent, [])],
        "": [(0, INVALID, "Topic name is invalid: the empty string is not allowed", [])],
    }


def test_a_stock_admin_client_is_refused_without_read() -> None:
    acls = ["allow User:ANONYMOUS Describe topic:*"]
    with running(topics=[("secret", 1)], acls=acls) as s:
        client = admin(s.bootstrap)
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                client.describe_producers([TopicPartition("secret", 0)], broker_id=0)
        finally:
            client.close()
