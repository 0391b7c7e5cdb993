"""Broker configuration under Kafka's own config names.

Each field's Kafka name is its Python name with dots for underscores
(`group_min_session_timeout_ms` is `group.min.session.timeout.ms`), so the names cannot drift.
Defaults are Kafka's, except where a comment says why not.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.java_numbers import java_double, java_integer


class ConfigError(ValueError):
    pass


# Second Kafka names of a config, each to its first (KafkaConfig.populateSynonyms).
ALIASES = {"node.id": "broker.id"}


# Kafka's two ACL authorizers (KRaft's and the ZooKeeper-era one): either switches ACLs on,
# with the same rules.
AUTHORIZERS = (
    "",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)


@dataclass(frozen=True, slots=True)
class Config:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    # Kafka waits 3 s before the first rebalance of an empty group so that members starting
    # together land in one generation. A test coordinator must not add 3 s to every CI join.
    group_initial_rebalance_delay_ms: int = 0
    group_max_size: int = 2_147_483_647
    offsets_topic_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    # Idle connections (and half-sent requests making no progress) are closed after this.
    connections_max_idle_ms: int = 600_000
    max_connections: int = 2_147_483_647
    # Kafka bounds its broker-wide request queue with this; here it bounds each connection's
    # requests awaiting their answer: beyond it the connection is not read (back-pressure).
    queued_max_requests: int = 500
    # The most partitions one DescribeTopicPartitions answer carries, whatever its client asks.
    max_request_partition_size_limit: int = 2000
    # Also named node.id, KRaft's name for it (see ALIASES).
    broker_id: int = 0
    # What a KRaft node is: this one is always both, the cluster's only broker and its only
    # controller (Kafka's combined mode).
    process_roles: str = "broker,controller"
    # PLAINTEXT://HOST:PORT to advertise in Metadata and FindCoordinator instead of the
    # address each client connected to (behind a proxy, NAT or port mapping).
    advertised_listeners: str = ""
    # Durability of commits and group changes: write | fsync | none (see README).
    log_flush_policy: str = "write"
    # Kafka's offsets topic uses 100 MiB segments; smaller ones give the cleaner work sooner.
    offsets_topic_segment_bytes: int = 8 * 1024 * 1024
    log_cleaner_delete_retention_ms: int = 86_400_000
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_min_cleanable_ratio: float = 0.5
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    # KIP-848 consumer groups. Kafka's heartbeat interval (5 s) and session timeout (45 s)
    # make every CI test wait for seconds; these reconcile in a fraction of a second and evict
    # a dead member in seconds. Set Kafka's values to reproduce its timing.
    group_consumer_heartbeat_interval_ms: int = 500
    group_consumer_min_heartbeat_interval_ms: int = 100
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_session_timeout_ms: int = 10_000
    group_consumer_min_session_timeout_ms: int = 1_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_max_size: int = 2_147_483_647
    # KIP-1263 (Kafka 4.3): a group's target assignment is recomputed at most once per
    # interval, so a thousand members joining cost a few computations, not a thousand. Kafka's
    # 1000 ms would hold a small test group's second member back; 100 ms batches large joins
    # and is not felt by small ones. 0 computes in the heartbeat that bumped the epoch (4.0).
    group_consumer_assignment_interval_ms: int = 100
    group_consumer_min_assignment_interval_ms: int = 0
    group_consumer_max_assignment_interval_ms: int = 15_000
    group_consumer_assignors: str = "uniform,range"
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups, with the consumer groups' quick heartbeat and session for the same
    # reason (Kafka: 5 s and 45 s); the rest are Kafka's.
    group_share_heartbeat_interval_ms: int = 500
    group_share_min_heartbeat_interval_ms: int = 100
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_session_timeout_ms: int = 10_000
    group_share_min_session_timeout_ms: int = 1_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_max_size: int = 200
    group_share_record_lock_duration_ms: int = 30_000
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2_000
    # Topic defaults (each topic config's broker synonym), Kafka's values. Retention and roll
    # times as Kafka reads them: log.retention.ms if set, else log.retention.minutes if set,
    # else log.retention.hours; log.roll.ms if set, else log.roll.hours (None: not set).
    log_retention_ms: int | None = None
    log_retention_minutes: int | None = None
    log_retention_hours: int = 168
    log_retention_bytes: int = -1
    log_segment_bytes: int = 1_073_741_824
    log_roll_ms: int | None = None
    log_roll_hours: int = 168
    log_cleanup_policy: str = "delete"
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = 9_223_372_036_854_775_807
    compression_type: str = "producer"
    message_max_bytes: int = 1_048_588
    log_message_timestamp_type: str = "CreateTime"
    log_message_timestamp_before_max_ms: int = 9_223_372_036_854_775_807
    log_message_timestamp_after_max_ms: int = 3_600_000
    log_retention_check_interval_ms: int = 300_000
    # An idempotent producer silent this long (by its last batch's timestamp) is forgotten by
    # every partition, as Kafka's ProducerStateManager forgets it: state stays bounded on a
    # long-running server that sees many short-lived producers.
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    # Transactions: the longest transaction.timeout.ms a producer may ask for, and how often
    # transactions open past their timeout are aborted (Kafka's names and defaults).
    transaction_max_timeout_ms: int = 900_000
    # A transactional id not used for this long is forgotten (its producer id with it).
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    # The coordinator's log, `__transaction_state` (Kafka's defaults; fixed once the topic
    # is made, as offsets.topic.num.partitions is).
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104_857_600
    # The share groups' delivery state, `__share_group_state` (Kafka's share coordinator's
    # defaults; fixed once the topic is made).
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_segment_bytes: int = 104_857_600
    # Replication, under Kafka's names, on a broker that is alone: a second replica has nowhere
    # to be, so the replication factors and the transaction log's min ISR can only be 1. (Kafka's
    # defaults, 3 and 2, are what a one-broker Kafka is configured away from: with them its
    # offsets and transaction topics are never created.) min.insync.replicas is every topic's
    # default; above 1 an acks=all produce gets NOT_ENOUGH_REPLICAS, as on a one-broker Kafka.
    offsets_topic_replication_factor: int = 1
    transaction_state_log_replication_factor: int = 1
    transaction_state_log_min_isr: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    # The group protocols served (Kafka 4.0's default): without `consumer`, ConsumerGroupHeartbeat
    # and ConsumerGroupDescribe are answered UNSUPPORTED_VERSION, as Kafka answers them.
    group_coordinator_rebalance_protocols: str = "classic,consumer"
    delete_topic_enable: bool = True
    # ACLs are enforced only with an authorizer, named as Kafka names its own (README, ACLs).
    authorizer_class_name: str = ""
    # Principals allowed everything, `;`-separated as in Kafka (User:admin;User:ops).
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    # Security (see server/security/): listeners by name, each PLAINTEXT, SSL, SASL_PLAINTEXT
    # or SASL_SSL. Empty `listeners` means the one PLAINTEXT listener of --host/--port.
    listeners: str = ""
    listener_security_protocol_map: str = (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    )
    # Only PEM key stores are read here (Kafka's default type is JKS, which Python cannot load).
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""
    ssl_keystore_password: str = dataclasses.field(default="", metadata={"sensitive": True})
    ssl_key_password: str = dataclasses.field(default="", metadata={"sensitive": True})
    ssl_keystore_key: str = dataclasses.field(default="", metadata={"sensitive": True})
    # PASSWORD-typed in Kafka (SslConfigs): never sent back, though a certificate.
    ssl_keystore_certificate_chain: str = dataclasses.field(
        default="", metadata={"sensitive": True}
    )
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    ssl_truststore_certificates: str = dataclasses.field(default="", metadata={"sensitive": True})
    ssl_client_auth: str = "none"
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    # Kafka's default is GSSAPI, which is not served here; OAUTHBEARER (unsecured tokens, which
    # anyone can mint) must be enabled explicitly.
    sasl_enabled_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    sasl_jaas_config: str = dataclasses.field(default="", metadata={"sensitive": True})
    sasl_server_max_receive_size: int = 524_288
    connections_max_reauth_ms: int = 0
    # `listener.name.<listener>.<config>` overrides (and `...<mechanism>.sasl.jaas.config`),
    # in the order given.
    listener_overrides: tuple[tuple[str, str], ...] = dataclasses.field(
        default=(), metadata={"kafka": False}
    )
    # The Kafka names given explicitly (DescribeConfigs reports them as STATIC_BROKER_CONFIG).
    explicit: frozenset[str] = dataclasses.field(
        default=frozenset(), metadata={"kafka": False}, compare=False
    )

    @staticmethod
    def kafka_name(field_name: str) -> str:
        return field_name.replace("_", ".")

    @classmethod
    @functools.cache
    def _kafka_fields(cls) -> dict[str, dataclasses.Field[Any]]:
        # Made once: every describe and every topic-default rebuild looks names up here.
        fields = {
            cls.kafka_name(f.name): f
            for f in dataclasses.fields(cls)
            if f.metadata.get("kafka", True)
        }
        for alias, name in ALIASES.items():
            fields[alias] = fields[name]
        return fields

    @classmethod
    def known_names(cls) -> list[str]:
        return list(cls._kafka_fields())

    @classmethod
    def sensitive(cls, name: str) -> bool:
        """Whether a config holds a secret (DescribeConfigs hides its value, as Kafka does)."""
        if name.startswith("listener.name."):
            return name.endswith(("jaas.config", "password", "keystore.key"))
        field = cls._kafka_fields().get(name)
        return field is not None and bool(field.metadata.get("sensitive"))

    def value_of(self, name: str) -> str | None:
        """A broker config's value as Kafka would print it; None if there is no such config or
        it is not set (a config whose Kafka default is null)."""
        field = self._kafka_fields().get(name)
        if field is None:
            return None
        return _printed(getattr(self, field.name))

    @classmethod
    def default_of(cls, name: str) -> str | None:
        """A broker config's default as Kafka would print it; None as value_of."""
        field = cls._kafka_fields().get(name)
        if field is None:
            return None
        return _printed(field.default)

    @classmethod
    def from_pairs(cls, pairs: dict[str, str] | list[tuple[str, str]]) -> Config:
        """Build a config from Kafka-named settings, rejecting unknown names and bad values."""
        fields = cls._kafka_fields()
        values: dict[str, Any] = {}
        items = list(pairs.items() if isinstance(pairs, dict) else pairs)
        overrides = []
        explicit: set[str] = set()
        given: dict[str, Any] = {}
        for name, raw in items:
            if name.startswith("listener.name."):
                overrides.append((name, raw))
                continue
            field = fields.get(name)
            if field is None:
                raise ConfigError(f"unknown config {name!r}; known: {', '.join(sorted(fields))}")
            value = _parse(name, field.type, raw)
            # KafkaConfig.populateSynonyms: a config given under either of its names is given
            # under both, and two given must agree (KafkaConfig.validateValues' words).
            values[field.name] = given[name] = value
            explicit |= {n for n, f in fields.items() if f is field}
        for alias, first in ALIASES.items():
            if alias in given and first in given and given[alias] != given[first]:
                raise ConfigError(f"You must set `{alias}` to the same value as `{first}`.")
        if overrides:
            values["listener_overrides"] = tuple(overrides)
        config = cls(**values, explicit=frozenset(explicit | {n for n, _ in overrides}))
        config.validate()
        return config

    def validate(self) -> None:
        """ConfigError naming the first rule of Kafka's (or minicoord's) that the values break."""
        from minicoord.server.config_checks import check

        check(self)

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.authorizer_class_name.strip())

    @property
    def super_user_set(self) -> frozenset[str]:
        return frozenset(u.strip() for u in self.super_users.split(";") if u.strip())

    @property
    def consumer_assignors(self) -> list[str]:
        return [a.strip() for a in self.group_consumer_assignors.split(",") if a.strip()]

    @property
    def rebalance_protocols(self) -> frozenset[str]:
        return frozenset(
            p.strip() for p in self.group_coordinator_rebalance_protocols.split(",") if p.strip()
        )

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.rebalance_protocols


def _printed(value: Any) -> str | None:
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parse(name: str, kind: Any, raw: str) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    # `int | None`: a config whose Kafka default is null (set, it is an int).
    kind = kind.removesuffix(" | None")
    if kind == "bool":
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{name} takes true or false, not {raw!r}")
        return lowered == "true"
    if kind in ("int", "float"):
        try:
            return (java_integer if kind == "int" else java_double)(raw.strip())
        except ValueError:
            what = "an integer" if kind == "int" else "a number"
            raise ConfigError(f"{name} takes {what}, not {raw!r}") from None
    return raw


def with_authorizer(
    pairs: list[tuple[str, str]], acls: Iterable[object], super_users: Iterable[str]
) -> list[tuple[str, str]]:
    """Settings plus what ACLs or super users given as conveniences (--acl, --super-user,
    `running(acls=...)`) imply: the authorizer on, unless configured, and the super users
    added to `super.users`."""
    acls, super_users = list(acls), list(super_users)
    if not acls and not super_users:
        return pairs
    out = dict(pairs)
    out.setdefault("authorizer.class.name", AUTHORIZERS[1])
    if super_users:
        given = [u for u in out.get("super.users", "").split(";") if u.strip()]
        out["super.users"] = ";".join(given + super_users)
    return list(out.items())


def parse_setting(text: str) -> tuple[str, str]:
    """`key=value` as given to --config."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"expected key=value, got {text!r}")
    return key.strip(), value
