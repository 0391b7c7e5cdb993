"""The rules a broker config's values must keep together: ranges, cross-field limits and
what a single combined node can serve, each in Kafka's words where Kafka has the rule."""

from __future__ import annotations

from minicoord.server.broker_synonyms import broker_synonyms, in_topic_unit
from minicoord.server.config import AUTHORIZERS, Config, ConfigError
from minicoord.server.topic_config_defs import TOPIC_CONFIGS


def check(config: Config) -> None:
    if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
        raise ConfigError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
    for name in (
        "offsets_topic_num_partitions",
        "transaction_state_log_num_partitions",
        "share_coordinator_state_topic_num_partitions",
        "num_partitions",
        "group_max_size",
        "connections_max_idle_ms",
        "max_connections",
        "queued_max_requests",
        "socket_request_max_bytes",
        "max_request_partition_size_limit",
        "offsets_retention_minutes",
        "offsets_retention_check_interval_ms",
        "log_retention_check_interval_ms",
        "producer_id_expiration_ms",
        "producer_id_expiration_check_interval_ms",
        "transaction_max_timeout_ms",
        "transactional_id_expiration_ms",
        "transaction_abort_timed_out_transaction_cleanup_interval_ms",
    ):
        if getattr(config, name) < 1:
            raise ConfigError(f"{Config.kafka_name(name)} must be at least 1")
    security = {n for n in config.explicit if n.startswith(("listener", "ssl.", "sasl."))}
    if config.advertised_listeners or config.listeners or config.listener_overrides or security:
        from minicoord.server.security.listeners import validate_listeners

        validate_listeners(config)
    if config.log_flush_policy not in ("write", "fsync", "none"):
        raise ConfigError("log.flush.policy is one of write, fsync, none")
    for name in (
        "offsets_topic_segment_bytes",
        "transaction_state_log_segment_bytes",
        "share_coordinator_state_topic_segment_bytes",
    ):
        if getattr(config, name) < 1024:
            raise ConfigError(f"{Config.kafka_name(name)} must be at least 1024")
    if not 0 < config.log_cleaner_min_cleanable_ratio <= 1:
        raise ConfigError("log.cleaner.min.cleanable.ratio must be in (0, 1]")
    if config.group_initial_rebalance_delay_ms < 0:
        raise ConfigError("group.initial.rebalance.delay.ms must not be negative")
    if config.broker_id < 0:
        # KRaft's requirement (KafkaConfig.validateValues), in its words.
        raise ConfigError(
            "Missing configuration `node.id` which is required when `process.roles` is "
            "defined (i.e. when running in KRaft mode)."
        )
    _process_roles(config)
    _consumer_groups(config)
    _replication(config)
    _rebalance_protocols(config)
    _topic_defaults(config)
    for user in config.super_user_set:
        # StandardAuthorizer parses each with SecurityUtils.parseKafkaPrincipal.
        if ":" not in user:
            raise ConfigError(
                f"super.users: {user!r} is not a principal: expected a string in format "
                "principalType:principalName (User:admin)"
            )
    if config.authorizer_class_name.strip() not in AUTHORIZERS:
        raise ConfigError(
            "authorizer.class.name is empty (no ACLs) or one of "
            + ", ".join(a for a in AUTHORIZERS if a)
        )


def _consumer_groups(config: Config) -> None:
    for kind in ("heartbeat_interval", "session_timeout"):
        low, value, high = (
            getattr(config, f"group_consumer_{p}{kind}_ms") for p in ("min_", "", "max_")
        )
        if not 1 <= low <= value <= high:
            raise ConfigError(
                f"group.consumer.{kind.replace('_', '.')}.ms must lie within "
                f"group.consumer.min.{kind.replace('_', '.')}.ms and "
                f"group.consumer.max.{kind.replace('_', '.')}.ms"
            )
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
        raise ConfigError(
            "group.consumer.heartbeat.interval.ms must be less than "
            "group.consumer.session.timeout.ms"
        )
    if config.group_consumer_max_size < 1:
        raise ConfigError("group.consumer.max.size must be at least 1")
    _check_share(config)
    if not (
        0
        <= config.group_consumer_min_assignment_interval_ms
        <= config.group_consumer_assignment_interval_ms
        <= config.group_consumer_max_assignment_interval_ms
    ):
        raise ConfigError(
            "group.consumer.assignment.interval.ms must lie within "
            "group.consumer.min.assignment.interval.ms and "
            "group.consumer.max.assignment.interval.ms"
        )
    assignors = config.consumer_assignors
    if not assignors or len(set(assignors)) != len(assignors):
        raise ConfigError("group.consumer.assignors is a non-empty list without duplicates")
    unknown = [a for a in assignors if a not in ("uniform", "range")]
    if unknown:
        raise ConfigError(
            f"group.consumer.assignors: {', '.join(unknown)} is not an assignor here "
            "(uniform, range)"
        )
    if config.group_consumer_migration_policy.lower() not in (
        "bidirectional",
        "upgrade",
        "downgrade",
        "disabled",
    ):
        raise ConfigError(
            "group.consumer.migration.policy is one of bidirectional, upgrade, downgrade, disabled"
        )


def _process_roles(config: Config) -> None:
    roles = [r.strip() for r in config.process_roles.split(",") if r.strip()]
    for role in roles:
        if role not in ("broker", "controller"):
            # ConfigDef.ValidList.in's words.
            raise ConfigError(
                f"Invalid value {config.process_roles} for configuration process.roles: "
                "String must be one of: broker, controller"
            )
    if len(set(roles)) != len(roles):
        raise ConfigError(f"Duplicate role names found in `process.roles`: [{', '.join(roles)}]")
    if set(roles) != {"broker", "controller"}:
        raise ConfigError(
            "process.roles: minicoord is one node, the cluster's broker and its controller "
            "at once: only broker,controller is served"
        )


def _replication(config: Config) -> None:
    for name in (
        "offsets_topic_replication_factor",
        "transaction_state_log_replication_factor",
        "transaction_state_log_min_isr",
        "default_replication_factor",
    ):
        if getattr(config, name) != 1:
            raise ConfigError(
                f"{Config.kafka_name(name)} can only be 1: minicoord is a single broker, "
                "where no second replica can be"
            )
    if config.min_insync_replicas < 1:
        raise ConfigError("min.insync.replicas must be at least 1")


def _rebalance_protocols(config: Config) -> None:
    protocols = config.rebalance_protocols
    unknown = protocols - {"classic", "consumer", "share", "streams"}
    if unknown:
        raise ConfigError(
            f"group.coordinator.rebalance.protocols: {', '.join(sorted(unknown))} is not a "
            "protocol (classic, consumer, share, streams)"
        )
    if "classic" not in protocols:
        # KafkaConfig's own check.
        raise ConfigError("Disabling the 'classic' protocol is not supported.")
    # `share` is taken and changes nothing, as in Kafka 4.1+: share groups are on or off by
    # the share.version feature.
    if "streams" in protocols:
        raise ConfigError(
            "group.coordinator.rebalance.protocols: minicoord does not serve streams groups "
            "(KIP-1071)"
        )


def _topic_defaults(config: Config) -> None:
    # Each is the default of a topic config: it must be a value that config accepts.
    for definition in TOPIC_CONFIGS.values():
        for name, factor in broker_synonyms(definition):
            raw = config.value_of(name)
            if raw is None:
                continue
            try:
                definition.parse(in_topic_unit(raw, factor))
            except ValueError as exc:
                raise ConfigError(f"{name}: {exc}") from None


def _check_share(config: Config) -> None:
    """Kafka's bounds of the share-group configs (GroupCoordinatorConfig, ShareGroupConfig):
    each value within its min and max (whose own defaults for the heartbeat and session are
    lower than Kafka's, for minicoord's quick defaults), the interval under the session."""
    for kind in ("heartbeat_interval", "session_timeout", "record_lock_duration"):
        low, value, high = (
            getattr(config, f"group_share_{p}{kind}_ms") for p in ("min_", "", "max_")
        )
        if not 1 <= low <= value <= high:
            name = kind.replace("_", ".")
            raise ConfigError(
                f"group.share.{name}.ms must lie within group.share.min.{name}.ms and "
                f"group.share.max.{name}.ms"
            )
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ConfigError(
            "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
        )
    for name, value, low, high in (
        ("group.share.max.size", config.group_share_max_size, 1, 1000),
        (
            "group.share.record.lock.duration.ms",
            config.group_share_record_lock_duration_ms,
            1000,
            3_600_000,
        ),
        ("group.share.delivery.count.limit", config.group_share_delivery_count_limit, 2, 10),
        (
            "group.share.partition.max.record.locks",
            config.group_share_partition_max_record_locks,
            100,
            10_000,
        ),
    ):
        if not low <= value <= high:
            raise ConfigError(f"{name} must lie within {low} and {high}")
