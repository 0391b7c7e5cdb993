"""Two principals on one server, as in production: ACLs tell them apart by their SASL login.
alice may read her group; bob, logged in on the same listener, may not read his and is
refused while alice consumes and commits undisturbed; a deny for bob alone beats his
prefixed allow at commit."""

from __future__ import annotations

from typing import Any

import pytest
from aclkit import confluent_consumer, confluent_producer, poll_until
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from minicoord.testing.embedded import EmbeddedServer, running

TOPIC = "shared"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def _login(server: EmbeddedServer, user: str) -> dict[str, Any]:
    return server.client(user=user, mechanism="SCRAM-SHA-512").confluent()


@pytest.fixture
def server() -> EmbeddedServer:
    acls = [
        f"allow User:alice All topic:{TOPIC}",
        f"allow User:bob All topic:{TOPIC}",
        "allow User:alice Read group:alice-",
        "allow User:bob Read group:alice- prefixed",
        "deny User:bob Read group:alice-orders",
    ]
    with running(
        topics=[(TOPIC, 1)],
        acls=acls,
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        users=USERS,
    ) as server:
        yield server


def test_bob_is_refused_his_group_while_alice_consumes_and_commits(
    server: EmbeddedServer,
) -> None:
    producer = confluent_producer(server.bootstrap, _login(server, "bob"))
    for i in range(3):
        producer.produce(TOPIC, f"m{i}".encode())
    assert producer.flush(10) == 0
    alice = confluent_consumer(server.bootstrap, "alice-", _login(server, "alice"))
    bob = confluent_consumer(server.bootstrap, "bob-group", _login(server, "bob"))
    try:
        alice.subscribe([TOPIC])
        bob.subscribe([TOPIC])
        event = poll_until(bob, lambda m: m.error() is not None)
        assert event.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        msg = poll_until(alice, lambda m: m.error() is None)
        alice.commit(message=msg, asynchronous=False)
        assert alice.committed([TopicPartition(TOPIC, 0)], 10)[0].offset == msg.offset() + 1
        # bob has not even Describe on bob-group, so (as on Kafka) FindCoordinator already
        # refuses him and his client never gets as far as a commit; the commit refusal is the
        # next test's, where Describe is left him.
    finally:
        alice.close()
        bob.close()


def test_deny_for_one_principal_beats_its_prefixed_allow(server: EmbeddedServer) -> None:
    # bob may read every alice- group by prefix, except alice-orders, denied to him alone.
    allowed = confluent_consumer(server.bootstrap, "alice-reports", _login(server, "bob"))
    denied = confluent_consumer(server.bootstrap, "alice-orders", _login(server, "bob"))
    try:
        with pytest.raises(KafkaException) as info:
            denied.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        allowed.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        assert allowed.committed([TopicPartition(TOPIC, 0)], 10)[0].offset == 1
    finally:
        allowed.close()
        denied.close()
