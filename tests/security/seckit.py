"""Helpers of tests/security: seed a topic and read a group's commits over PLAINTEXT."""

from __future__ import annotations

import uuid
from typing import Any

from minicoord.testing.embedded import EmbeddedServer

LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
)
USERS = {"alice": "alice-secret-7Qx", "bob": "bob-secret-9Zk"}
SECURE_CONFIGS = {
    "listener.name.ssl.ssl.client.auth": "required",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "group.min.session.timeout.ms": 1000,
}

# (listener, SASL mechanism, client certificate): the ways every client must get in.
WAYS = [
    ("SASL_SSL", "PLAIN", False),
    ("SASL_SSL", "SCRAM-SHA-512", False),
    ("SSL", None, True),
]
WAY_IDS = ["sasl_ssl-plain", "sasl_ssl-scram512", "ssl-client-cert"]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def seed(server: EmbeddedServer, topic: str, count: int = 3) -> None:
    """`count` records in partition 0 of a new one-partition topic."""
    from confluent_kafka import Producer

    producer = Producer(server.client("PLAINTEXT").confluent())
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode(), partition=0)
    assert producer.flush(15) == 0


def committed(server: EmbeddedServer, group: str, topic: str) -> int:
    """The group's committed offset of partition 0, read over the PLAINTEXT listener."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(server.client("PLAINTEXT").confluent() | {"group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    finally:
        consumer.close()


def principals(server: EmbeddedServer) -> set[str]:
    """The principals of every connection open now."""
    return server.call(lambda: {c.principal for c in server.server.broker.connections})


def expected_principal(user: str | None, cert: bool) -> str:
    return "User:CN=client,O=minicoord" if cert else f"User:{user}"


def settings(server: EmbeddedServer, way: tuple[str, str | None, bool], user: str = "alice") -> Any:
    listener, mechanism, cert = way
    return server.client(listener, user, mechanism, client_cert=cert)
