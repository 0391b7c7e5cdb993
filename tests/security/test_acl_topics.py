"""Topic ACLs against stock clients: Metadata hides what a principal may not describe,
produce needs Write, auto-creation needs Create."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aclkit import AUTHORIZER, Identity, admin, confluent_producer
from confluent_kafka import KafkaError, KafkaException
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from minicoord.server.security.specs import parse_acl
from minicoord.testing.embedded import EmbeddedServer, running

TOPICS = [("data", 1), ("readonly", 1), ("secret", 1), ("visible", 1)]


def topic_acls(principal: str) -> list[str]:
    return [
        f"allow {principal} All topic:data",
        f"allow {principal} Read topic:readonly",  # implies Describe, not Write
        f"allow {principal} Describe topic:visible",
        # Nothing on "secret"; Describe (not Create) on names starting "auto-".
        f"allow {principal} Describe topic:auto- prefixed",
    ]


@pytest.fixture
def server(identity: Identity) -> Iterator[EmbeddedServer]:
    with running(
        {"authorizer.class.name": AUTHORIZER},
        topics=TOPICS,
        acls=topic_acls(identity.principal),
        **identity.server,
    ) as server:
        yield server


def test_confluent_metadata_hides_undescribable_topics(
    server: EmbeddedServer, identity: Identity
) -> None:
    client = admin(server.bootstrap, identity.confluent)
    listed = client.list_topics(timeout=10).topics
    assert {"data", "readonly", "visible"} <= set(listed)
    assert "secret" not in listed
    named = client.list_topics(topic="secret", timeout=10).topics["secret"]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_metadata_hides_undescribable_topics(
    server: EmbeddedServer, identity: Identity
) -> None:
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, **identity.kafka_python)
    try:
        topics = set(client.list_topics())
    finally:
        client.close()
    assert {"data", "readonly", "visible"} <= topics
    assert "secret" not in topics


def test_confluent_produce_without_write_is_refused(
    server: EmbeddedServer, identity: Identity
) -> None:
    producer = confluent_producer(server.bootstrap, identity.confluent)
    reports: list[object] = []
    producer.produce("readonly", b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.produce("data", b"y", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(15) == 0
    codes = sorted((err.code() if err is not None else 0) for err in reports)
    assert codes == [0, KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_kafka_python_produce_without_write_is_refused(
    server: EmbeddedServer, identity: Identity
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap, max_block_ms=10000, **identity.kafka_python
    )
    try:
        producer.send("data", b"ok").get(10)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("readonly", b"no").get(10)
    finally:
        producer.close(5)


def test_auto_creation_needs_create(server: EmbeddedServer, identity: Identity) -> None:
    client = admin(server.bootstrap, identity.confluent)
    # Describe but no Create: refused, and not created.
    named = client.list_topics(topic="auto-new", timeout=10).topics["auto-new"]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert server.call(lambda: server.server.broker.topics.get("auto-new")) is None


def test_idempotent_producer_needs_write_on_some_topic(identity: Identity) -> None:
    # Kafka 3+: Write on any topic stands in for IdempotentWrite on the cluster.
    with running(
        topics=[("data", 1)],
        acls=[f"allow {identity.principal} Write topic:data"],
        **identity.server,
    ) as server:
        producer = confluent_producer(
            server.bootstrap, {**identity.confluent, "enable.idempotence": True}
        )
        reports: list[object] = []
        producer.produce("data", b"x", on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(15) == 0
        assert reports == [None]
    with running(
        topics=[("data", 1)],
        acls=[f"allow {identity.principal} Read topic:data"],
        **identity.server,
    ) as server:
        errors: list[KafkaError] = []
        producer = confluent_producer(
            server.bootstrap,
            {**identity.confluent, "enable.idempotence": True, "error_cb": errors.append},
        )
        try:
            # The fatal error surfaces through error_cb, or raised by produce() or flush().
            producer.produce("data", b"x")
            producer.flush(5)
        except KafkaException as exc:
            errors.append(exc.args[0])
        assert any(e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED for e in errors), errors


def test_metadata_follows_acl_changes(server: EmbeddedServer, identity: Identity) -> None:
    client = admin(server.bootstrap, identity.confluent)
    assert "secret" not in client.list_topics(timeout=10).topics
    server.call(
        lambda: server.server.broker.add_acls(
            [parse_acl(f"allow {identity.principal} Describe topic:secret")]
        )
    )
    assert "secret" in client.list_topics(timeout=10).topics
