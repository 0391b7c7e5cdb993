"""Group ACLs against stock clients (confluent-kafka, kafka-python, aiokafka): Read on the
group for join and commit, deny beats allow, prefixed ACLs; an allowed group beside a
refused one keeps working."""

from __future__ import annotations

import asyncio

import pytest
from aclkit import Identity, confluent_consumer, confluent_producer, poll_until
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import GroupAuthorizationFailedError as AioGroupAuthorizationFailedError
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import GroupAuthorizationFailedError
from kafka.structs import OffsetAndMetadata
from minicoord.testing.embedded import EmbeddedServer, running

TOPIC = "data"


def group_acls(principal: str) -> list[str]:
    return [
        f"allow {principal} All topic:{TOPIC}",
        f"allow {principal} Read group:ok",
        # Deny beats allow: Read on "blocked" is both allowed and denied.
        f"allow {principal} Read group:blocked",
        f"deny {principal} Read group:blocked",
        f"allow {principal} Read group:app- prefixed",
    ]


@pytest.fixture
def server(identity: Identity) -> EmbeddedServer:
    with running(
        topics=[(TOPIC, 1)], acls=group_acls(identity.principal), **identity.server
    ) as server:
        yield server


def _produce(server: EmbeddedServer, identity: Identity, count: int = 3) -> None:
    producer = confluent_producer(server.bootstrap, identity.confluent)
    for i in range(count):
        producer.produce(TOPIC, f"m{i}".encode())
    assert producer.flush(10) == 0


def test_confluent_join_refused_in_blocked_group_while_ok_group_consumes(
    server: EmbeddedServer, identity: Identity
) -> None:
    _produce(server, identity)
    ok = confluent_consumer(server.bootstrap, "ok", identity.confluent)
    blocked = confluent_consumer(server.bootstrap, "blocked", identity.confluent)
    try:
        ok.subscribe([TOPIC])
        blocked.subscribe([TOPIC])
        event = poll_until(blocked, lambda m: m.error() is not None)
        assert event.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        msg = poll_until(ok, lambda m: m.error() is None)
        ok.commit(message=msg, asynchronous=False)
        assert ok.committed([TopicPartition(TOPIC, 0)], 10)[0].offset == msg.offset() + 1
    finally:
        ok.close()
        blocked.close()


def test_confluent_manual_commit_refused_in_blocked_group(
    server: EmbeddedServer, identity: Identity
) -> None:
    _produce(server, identity, 1)
    consumer = confluent_consumer(server.bootstrap, "blocked", identity.confluent)
    try:
        with pytest.raises(KafkaException) as info:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_confluent_prefixed_acl_lets_a_group_join(
    server: EmbeddedServer, identity: Identity
) -> None:
    _produce(server, identity, 1)
    consumer = confluent_consumer(server.bootstrap, "app-orders", identity.confluent)
    try:
        consumer.subscribe([TOPIC])
        msg = poll_until(consumer, lambda m: m.error() is None)
        consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()
    # A group matching no ACL at all is refused (allow.everyone.if.no.acl.found=false).
    other = confluent_consumer(server.bootstrap, "apps", identity.confluent)
    try:
        other.subscribe([TOPIC])
        event = poll_until(other, lambda m: m.error() is not None)
        assert event.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        other.close()


def _kafka_python(server: EmbeddedServer, identity: Identity, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        request_timeout_ms=10000,
        **identity.kafka_python,
    )


def test_kafka_python_join_and_commit_refused_in_blocked_group(
    server: EmbeddedServer, identity: Identity
) -> None:
    _produce(server, identity)
    blocked = _kafka_python(server, identity, "blocked")
    try:
        blocked.subscribe([TOPIC])
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(50):
                blocked.poll(200)
    finally:
        blocked.close()
    # A manual commit, outside any generation: OffsetCommit itself is refused.
    manual = _kafka_python(server, identity, "blocked")
    try:
        manual.assign([KpTopicPartition(TOPIC, 0)])
        with pytest.raises(GroupAuthorizationFailedError):
            manual.commit({KpTopicPartition(TOPIC, 0): OffsetAndMetadata(1, "", -1)})
    finally:
        manual.close()
    ok = _kafka_python(server, identity, "ok")
    try:
        ok.subscribe([TOPIC])
        got = 0
        for _ in range(50):
            got += sum(len(v) for v in ok.poll(200).values())
            if got:
                break
        assert got
        ok.commit()
    finally:
        ok.close()


async def test_aiokafka_join_refused_in_blocked_group(
    server: EmbeddedServer, identity: Identity
) -> None:
    _produce(server, identity, 1)
    blocked = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=server.bootstrap,
        group_id="blocked",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **identity.kafka_python,
    )
    try:
        # aiokafka joins within start() (or the first fetch): the refusal surfaces there.
        with pytest.raises(AioGroupAuthorizationFailedError):
            await blocked.start()
            await asyncio.wait_for(blocked.getone(), 15)
    finally:
        await blocked.stop()
    ok = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=server.bootstrap,
        group_id="ok",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **identity.kafka_python,
    )
    await ok.start()
    try:
        await asyncio.wait_for(ok.getone(), 15)
        await ok.commit()
    finally:
        await ok.stop()
