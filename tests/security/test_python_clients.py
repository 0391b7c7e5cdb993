"""confluent-kafka, kafka-python and aiokafka join a group and commit over SASL_SSL (PLAIN and
SCRAM-SHA-512), over SSL with a client certificate, and (confluent-kafka) with OAUTHBEARER;
the connection's principal is the user, or the certificate's subject."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from minicoord.testing.embedded import EmbeddedServer
from seckit import WAY_IDS, WAYS, committed, expected_principal, fresh, principals, seed, settings

pytestmark = pytest.mark.clients

MORE_WAYS = [
    *WAYS,
    ("SASL_SSL", "OAUTHBEARER", False),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", False),
    ("SASL_PLAINTEXT", "PLAIN", False),
]
MORE_IDS = [*WAY_IDS, "sasl_ssl-oauthbearer", "sasl_plaintext-scram256", "sasl_plaintext-plain"]


@pytest.mark.parametrize("way", MORE_WAYS, ids=MORE_IDS)
def test_confluent_kafka_joins_and_commits(secure: EmbeddedServer, way: Any) -> None:
    from confluent_kafka import Consumer

    topic, group = fresh("cf"), fresh("cf-group")
    seed(secure, topic)
    client = settings(secure, way)
    conf = client.confluent() | {
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
    }
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert got == [b"record-0", b"record-1", b"record-2"]
        consumer.commit(asynchronous=False)
        assert expected_principal("alice", way[2]) in principals(secure)
    finally:
        consumer.close()
    assert committed(secure, group, topic) == 3


@pytest.mark.parametrize("way", WAYS, ids=WAY_IDS)
def test_kafka_python_joins_and_commits(secure: EmbeddedServer, way: Any) -> None:
    from kafka import KafkaConsumer

    topic, group = fresh("kp"), fresh("kp-group")
    seed(secure, topic)
    client = settings(secure, way, "bob")
    consumer = KafkaConsumer(
        topic,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20000,
        **client.kafka_python(),
    )
    try:
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == 3:
                break
        assert got == [b"record-0", b"record-1", b"record-2"]
        consumer.commit()
        assert expected_principal("bob", way[2]) in principals(secure)
    finally:
        consumer.close()
    assert committed(secure, group, topic) == 3


@pytest.mark.parametrize("way", WAYS, ids=WAY_IDS)
def test_aiokafka_joins_and_commits(secure: EmbeddedServer, way: Any) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = fresh("aio"), fresh("aio-group")
    seed(secure, topic)
    client = settings(secure, way)

    async def consume() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **client.aiokafka(),
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while len(got) < 3:
                    batch = await consumer.getmany(timeout_ms=500)
                    got.extend(m.value for records in batch.values() for m in records)
            await consumer.commit()
            assert expected_principal("alice", way[2]) in principals(secure)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(consume()) == [b"record-0", b"record-1", b"record-2"]
    assert committed(secure, group, topic) == 3
