"""A KIP-848 regex subscription resolves to the topics its member may describe, as Kafka's
coordinator filters it (filterTopicDescribeAuthorizedTopics), with stock confluent-kafka
consumers over SASL.

alice subscribes `^a\\..*` and may describe a.1 and a.2 only; carol subscribes a.secret by
name. Had alice's regex taken a.secret in, its partitions would sit with alice, whose
librdkafka never fetches nor gives up a topic it cannot describe: carol would get nothing
until alice was fenced at her rebalance timeout (sweep23).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from aclkit import confluent_producer
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from minicoord.testing.embedded import EmbeddedServer, running

TOPICS = [("a.1", 2), ("a.2", 2), ("a.secret", 2)]
USERS = {"alice": "alice-secret", "carol": "carol-secret", "admin": "admin-secret"}
ACLS = [
    "allow User:alice Read group:ga",
    "allow User:alice All topic:a.1",
    "allow User:alice All topic:a.2",
    "allow User:carol Read group:ga",
    "allow User:carol All topic:a.secret",
]
RECORDS = 5  # per partition


def sasl(server: EmbeddedServer, user: str) -> dict[str, Any]:
    return server.client(user=user, mechanism="SCRAM-SHA-512").confluent()


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    with running(
        topics=TOPICS,
        acls=ACLS,
        super_users=["User:admin"],
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        users=USERS,
    ) as server:
        producer = confluent_producer(server.bootstrap, sasl(server, "admin"))
        for name, partitions in TOPICS:
            for p in range(partitions):
                for i in range(RECORDS):
                    producer.produce(name, f"{name}-{p}-{i}".encode(), partition=p)
        assert producer.flush(10) == 0
        yield server


def consumer(server: EmbeddedServer, user: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "ga",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            **sasl(server, user),
        }
    )


def read(consumers: dict[str, Consumer], wanted: dict[str, int], timeout: float = 30) -> Any:
    """Poll every consumer (bounded) until each has read `wanted[user]` records."""
    got: dict[str, list[str]] = {user: [] for user in consumers}
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.1) + 1):
        for user, c in consumers.items():
            msg = c.poll(0.05)
            if msg is not None:
                assert msg.error() is None, (user, msg.error())
                got[user].append(msg.topic())
        if all(len(got[u]) >= n for u, n in wanted.items()) or time.monotonic() > deadline:
            break
    return got


def test_a_regex_takes_only_the_topics_its_member_may_describe(server: EmbeddedServer) -> None:
    alice = consumer(server, "alice")
    carol = consumer(server, "carol")
    try:
        alice.subscribe(["^a\\..*"])
        got = read({"alice": alice}, {"alice": 4 * RECORDS})
        assert sorted(got["alice"]) == ["a.1"] * 2 * RECORDS + ["a.2"] * 2 * RECORDS
        assert sorted((tp.topic, tp.partition) for tp in alice.assignment()) == [
            ("a.1", 0), ("a.1", 1), ("a.2", 0), ("a.2", 1)
        ]  # fmt: skip
        # Nothing she may not describe is in her group: she may describe it (Kafka refuses
        # ConsumerGroupDescribe with TOPIC_AUTHORIZATION_FAILED otherwise).
        admin = AdminClient({"bootstrap.servers": server.bootstrap, **sasl(server, "alice")})
        described = admin.describe_consumer_groups(["ga"], request_timeout=10)["ga"].result(15)
        assert [m.member_id for m in described.members] == [alice.memberid()]
        # carol, who may read a.secret, gets it at once, alice keeping hers.
        carol.subscribe(["a.secret"])
        got = read({"alice": alice, "carol": carol}, {"carol": 2 * RECORDS})
        assert got["carol"] == ["a.secret"] * 2 * RECORDS
        assert len(alice.assignment()) == 4
    finally:
        alice.close()
        carol.close()
