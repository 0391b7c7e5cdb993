"""`__consumer_offsets` as a stock admin client describes it: the overrides Kafka creates the
topic with (GroupCoordinatorService.groupMetadataTopicConfigs), its segment size the one the
server's offsets logs roll at (offsets.topic.segment.bytes); and `__transaction_state`, the
transaction coordinator's."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from minicoord.testing.embedded import running


def topic_overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's own configs (DYNAMIC_TOPIC_CONFIG), as confluent's admin describes them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(20)
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return {name: entry.value for name, entry in entries.items() if entry.source == dynamic}


def test_the_offsets_topic_reports_kafkas_overrides() -> None:
    segment = 2 * 1024 * 1024
    with running({"offsets.topic.segment.bytes": segment}, topics=[("t", 1)]) as server:
        # A commit makes the offsets topic, as a group's first FindCoordinator does in Kafka.
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g"})
        consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
        consumer.close()
        assert server.call(lambda: server.server.broker.topics.offsets.config.segment_bytes) == (
            segment
        )
        overrides = topic_overrides(server.bootstrap, "__consumer_offsets")
    assert overrides == {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(segment),
    }


def test_the_transaction_log_exists_from_the_first_transactional_producer() -> None:
    """`__transaction_state`, as Kafka makes it on the first FindCoordinator for a
    transactional id, with transaction.state.log.num.partitions partitions and
    TransactionLog's overrides."""
    with running({"transaction.state.log.num.partitions": 7}, topics=[("t", 1)]) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        assert "__transaction_state" not in admin.list_topics(timeout=20).topics
        producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "tx"})
        producer.init_transactions(20)
        listed = admin.list_topics(timeout=20).topics["__transaction_state"]
        assert len(listed.partitions) == 7
        overrides = topic_overrides(server.bootstrap, "__transaction_state")
    assert overrides == {
        "unclean.leader.election.enable": "false",
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": "1",
        "segment.bytes": "104857600",
    }
