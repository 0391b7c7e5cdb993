"""Helpers of the ACL wire tests: stock clients pointed at a server, bounded waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True)
class Identity:
    name: str
    principal: str
    # Extra client settings: librdkafka's names for confluent-kafka, kafka-python's kwargs.
    confluent: dict[str, Any] = field(default_factory=dict)
    kafka_python: dict[str, Any] = field(default_factory=dict)
    # Server arguments this identity needs (listeners, users) besides the ACLs.
    server: dict[str, Any] = field(default_factory=dict)


IDENTITIES = [
    Identity("anonymous", "User:ANONYMOUS"),
    # The same tests as a SASL user: the principal comes from the login, not the socket.
    Identity(
        "sasl-alice",
        "User:alice",
        confluent={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        },
        kafka_python={
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        },
        server={"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "users": {"alice": "alice-secret"}},
    ),
]


def confluent_consumer(bootstrap: str, group: str, extra: dict[str, Any]) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "topic.metadata.refresh.interval.ms": 1000,
            **extra,
        }
    )


def confluent_producer(bootstrap: str, extra: dict[str, Any]) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **extra})


def admin(bootstrap: str, extra: dict[str, Any]) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **extra})


def poll_until(consumer: Consumer, wanted: Callable[[Any], bool], timeout: float = 20) -> Any:
    """Poll (bounded) until a message or error event satisfies `wanted`; return it."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    for _ in range(int(timeout / 0.2) + 1):
        if time.monotonic() > deadline:
            break
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if wanted(msg):
            return msg
        seen.append(str(msg.error()) if msg.error() else f"message at {msg.offset()}")
    raise AssertionError(f"nothing wanted within {timeout}s; saw {seen[-5:]}")
