from __future__ import annotations

import re

import pytest
from minicoord.server.config import Config, ConfigError, parse_setting


def test_defaults_are_kafkas_except_the_initial_rebalance_delay() -> None:
    config = Config()
    assert config.group_min_session_timeout_ms == 6000
    assert config.group_max_session_timeout_ms == 1_800_000
    assert config.offsets_topic_num_partitions == 50
    assert config.socket_request_max_bytes == 104_857_600
    assert config.auto_create_topics_enable is True
    assert config.num_partitions == 1
    assert config.group_initial_rebalance_delay_ms == 0  # Kafka's is 3000; see README


def test_kafka_names_map_to_fields() -> None:
    config = Config.from_pairs(
        {
            "group.min.session.timeout.ms": "100",
            "auto.create.topics.enable": "FALSE",
            "offsets.topic.num.partitions": "3",
        }
    )
    assert config.group_min_session_timeout_ms == 100
    assert config.auto_create_topics_enable is False
    assert config.offsets_topic_num_partitions == 3
    assert "group.initial.rebalance.delay.ms" in Config.known_names()


@pytest.mark.parametrize(
    "pairs",
    [
        {"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"},
        {"offsets.topic.num.partitions": "0"},
        {"group.initial.rebalance.delay.ms": "-1"},
        {"unknown.thing": "1"},
        {"super.users": "User:ops;admin"},  # a principal needs its type, as Kafka parses it
        # Numbers as Java reads them, not as Python does.
        {"log.retention.ms": "86_400_000"},
        {"offsets.retention.minutes": "1_0"},
        {"log.retention.hours": "1.5"},
        {"log.roll.hours": "0"},  # at least 1, as Kafka's ConfigDef says
        # One broker: no second replica, whatever a multi-broker setup said.
        {"offsets.topic.replication.factor": "3"},
        {"transaction.state.log.replication.factor": "3"},
        {"transaction.state.log.min.isr": "2"},
        {"default.replication.factor": "2"},
        {"min.insync.replicas": "0"},
        # KafkaConfig: classic cannot be disabled; a protocol must be one Kafka knows.
        {"group.coordinator.rebalance.protocols": "consumer"},
        {"group.coordinator.rebalance.protocols": "classic,modern"},
        {"group.coordinator.rebalance.protocols": ""},
        # Kafka's, but not served here.
        {"group.coordinator.rebalance.protocols": "classic,streams"},
        # KRaft's identity: node.id and broker.id agree, and are not negative.
        {"node.id": "1", "broker.id": "2"},
        {"broker.id": "2", "node.id": "1"},
        {"node.id": "-1"},
        # One node is broker and controller at once.
        {"process.roles": "broker"},
        {"process.roles": "controller"},
        {"process.roles": "broker,broker,controller"},
        {"process.roles": "broker,voter"},
    ],
)
def test_invalid_configs_are_rejected(pairs: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        Config.from_pairs(pairs)


def test_numbers_are_read_as_java_reads_them() -> None:
    config = Config.from_pairs(
        {"log.retention.ms": " +3600000 ", "log.cleaner.min.cleanable.ratio": "0.25d"}
    )
    assert (config.log_retention_ms, config.log_cleaner_min_cleanable_ratio) == (3_600_000, 0.25)


def test_parse_setting_keeps_equals_in_values() -> None:
    assert parse_setting("a.b=c=d") == ("a.b", "c=d")


def test_single_broker_replication_settings_are_accepted() -> None:
    # What a one-broker Kafka is configured with (every single-node compose file has these).
    config = Config.from_pairs(
        {
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "2",
        }
    )
    assert config.min_insync_replicas == 2


def test_rebalance_protocols() -> None:
    assert Config().consumer_protocol_enabled
    assert not Config.from_pairs(
        {"group.coordinator.rebalance.protocols": " classic "}
    ).consumer_protocol_enabled
    assert Config.from_pairs(
        {"group.coordinator.rebalance.protocols": "consumer,classic"}
    ).consumer_protocol_enabled
    # `share` is a no-op in Kafka 4.1+ (share.version decides), so setups that still name it
    # start.
    assert Config.from_pairs(
        {"group.coordinator.rebalance.protocols": "classic,consumer,share"}
    ).consumer_protocol_enabled


def test_share_group_configs_are_bounded_as_kafkas() -> None:
    for pairs in (
        {"group.share.delivery.count.limit": "1"},
        {"group.share.partition.max.record.locks": "50"},
        {"group.share.record.lock.duration.ms": "999"},
        {"group.share.heartbeat.interval.ms": "10000"},  # not under the session timeout
    ):
        with pytest.raises(ConfigError):
            Config.from_pairs(pairs)
    config = Config.from_pairs({"group.share.delivery.count.limit": "10"})
    assert config.group_share_delivery_count_limit == 10
    # A quick lock for tests: the min comes down with it.
    quick = {"group.share.min.record.lock.duration.ms": "1000"}
    config = Config.from_pairs({**quick, "group.share.record.lock.duration.ms": "2000"})
    assert config.group_share_record_lock_duration_ms == 2000


def test_times_whose_kafka_default_is_null_are_unset_until_given() -> None:
    config = Config.from_pairs({"log.retention.minutes": "5"})
    assert (config.log_retention_ms, config.log_retention_minutes) == (None, 5)
    assert (config.value_of("log.retention.ms"), config.value_of("log.retention.minutes")) == (
        None,
        "5",
    )
    assert Config.default_of("log.retention.hours") == "168"
    assert Config.default_of("log.retention.ms") is None


def test_node_id_is_broker_id_under_kraft_name() -> None:
    # KafkaConfig.populateSynonyms: either name given is both given.
    for pairs in ({"node.id": "3"}, {"broker.id": "3"}, {"node.id": "3", "broker.id": "3"}):
        config = Config.from_pairs(pairs)
        assert config.broker_id == 3
        assert {"node.id", "broker.id"} <= config.explicit
        assert config.value_of("node.id") == config.value_of("broker.id") == "3"
    assert Config.default_of("node.id") == "0"
    assert "node.id" in Config.known_names() and "process.roles" in Config.known_names()
    assert Config.from_pairs({"process.roles": " controller , broker"}).process_roles


def test_a_disagreeing_node_id_is_refused_in_kafkas_words() -> None:
    # The last value given under each name counts, as in Kafka's properties.
    pairs = [("broker.id", "1"), ("node.id", "1"), ("broker.id", "2")]
    with pytest.raises(
        ConfigError, match=re.escape("You must set `node.id` to the same value as `broker.id`.")
    ):
        Config.from_pairs(pairs)
    assert (
        Config.from_pairs([("node.id", "1"), ("node.id", "2"), ("broker.id", "2")]).broker_id == 2
    )
