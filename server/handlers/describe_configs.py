"""DescribeConfigs (key 32), versions 1-4.

Topics: every Kafka topic config with its value and where the value came from (the topic's
override, a broker config set at runtime or given with --config, or Kafka's default), with
synonyms when asked (v1+), types and documentation when asked (v3+). The broker (named by its
id): every broker config minicoord has, read-only but for the topic defaults that can be set
at runtime; named "", the configs set at runtime for every broker. A group (any id, as in
Kafka): its consumer session timeout and heartbeat interval, its own or the broker's. The
broker's loggers (server/broker_loggers.py) with their levels. A client-metrics subscription
(any name, server/client_metrics.py): its metrics, interval and match, its own or the
defaults. v4 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeConfigsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server import broker_loggers
from minicoord.server.broker_config_docs import broker_doc
from minicoord.server.broker_loggers import BROKER_LOGGER
from minicoord.server.broker_synonyms import (
    BROKER_QUOTA_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    RUNTIME_BROKER_CONFIGS,
    SYNONYM_CHAINS,
    broker_default,
    broker_values,
    config_synonyms,
)
from minicoord.server.client_metrics import CLIENT_METRICS
from minicoord.server.config import Config
from minicoord.server.group_configs import GROUP_RESOURCE
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.java_numbers import node_id
from minicoord.server.security import authorize
from minicoord.server.topic_config_defs import ConfigDef, ConfigSource, ConfigType
from minicoord.server.topics import topic_name_error

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

API_KEY = 32
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
ResultCls = DescribeConfigsResponse.DescribeConfigsResult
Entry = ResultCls.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    synonyms = version >= 1 and bool(request.include_synonyms)
    documentation = version >= 3 and bool(request.include_documentation)
    results = []
    for r in request.resources:
        keys = list(r.configuration_keys) if r.configuration_keys else None
        error, message, configs = ErrorCode.NONE, None, []
        refusal = authorize.config_refusal(
            ctx, r.resource_type, r.resource_name, authorize.DESCRIBE_CONFIGS
        )
        if refusal is not None:
            error, message = refusal
        elif r.resource_type == RESOURCE_TOPIC:
            topic = ctx.broker.topics.get(r.resource_name)
            invalid = topic_name_error(r.resource_name)
            # Kafka's ConfigHelper: Topic.validate's words for an illegal name, and no message
            # for an unknown topic (clients show the error code's own).
            if invalid is not None:
                error, message = ErrorCode.INVALID_TOPIC_EXCEPTION, invalid
            elif topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                configs = [
                    Entry(
                        name=e.name,
                        value=e.value,
                        read_only=False,
                        config_source=e.source,
                        is_default=e.source is ConfigSource.DEFAULT_CONFIG,
                        is_sensitive=False,
                        synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in e.synonyms]
                        if synonyms
                        else [],
                        config_type=e.type,
                        documentation=e.doc if documentation else None,
                    )
                    for e in ctx.broker.topics.config_of(topic).describe(keys)
                ]
        elif r.resource_type == GROUP_RESOURCE:
            if not r.resource_name:
                error, message = ErrorCode.INVALID_REQUEST, "Group name must not be empty"
            else:
                described = ctx.broker.coordinator.group_configs.describe(r.resource_name, keys)
                configs = _own_or_default_entries(
                    described, ConfigSource.GROUP_CONFIG, synonyms, documentation, True
                )
        elif r.resource_type == RESOURCE_BROKER:
            node = ctx.broker.config.broker_id
            if not r.resource_name:
                configs = _broker_entries(ctx.broker, keys, synonyms, documentation, False)
            elif (named := node_id(r.resource_name)) is None:
                # ConfigHelper.resourceNameToBrokerId: Java's Integer.parseInt, so "00" is 0.
                error = ErrorCode.INVALID_REQUEST
                message = f"Broker id must be an integer, but it is: {r.resource_name}"
            elif named != node:
                error = ErrorCode.INVALID_REQUEST
                message = (
                    f"Unexpected broker id, expected {node} or empty string, but received "
                    f"{r.resource_name}"
                )
            else:
                configs = _broker_entries(ctx.broker, keys, synonyms, documentation, True)
        elif r.resource_type == BROKER_LOGGER:
            node = ctx.broker.config.broker_id
            # ConfigHelper's checks and words for this type.
            if not r.resource_name:
                error, message = ErrorCode.INVALID_REQUEST, "Broker id must not be empty"
            elif (named := node_id(r.resource_name)) is None:
                error = ErrorCode.INVALID_REQUEST
                message = f"Broker id must be an integer, but it is: {r.resource_name}"
            elif named != node:
                error = ErrorCode.INVALID_REQUEST
                message = f"Unexpected broker id, expected {node} but received {r.resource_name}"
            else:
                configs = [
                    Entry(
                        name=name,
                        value=level,
                        read_only=False,
                        config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                        is_default=False,
                        is_sensitive=False,
                        synonyms=[],
                        config_type=0,  # Kafka sets none for a logger (UNKNOWN)
                        documentation=None,
                    )
                    for name, level in broker_loggers.loggers().items()
                    if not keys or name in keys
                ]
        elif r.resource_type == CLIENT_METRICS:
            if not r.resource_name:
                error = ErrorCode.INVALID_REQUEST
                message = "Client metrics subscription name must not be empty"
            else:
                # Any name, as Kafka: one that does not exist has the defaults.
                described = ctx.broker.client_metrics.describe(r.resource_name, keys)
                configs = _own_or_default_entries(
                    described, ConfigSource.CLIENT_METRICS_CONFIG, synonyms, documentation, False
                )
        else:
            error = ErrorCode.INVALID_REQUEST
            message = f"resource type {r.resource_type} is not supported"
        results.append(
            ResultCls(
                error_code=error,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


def _own_or_default_entries(
    described: list[tuple[ConfigDef, str, bool]],
    own_source: ConfigSource,
    synonyms: bool,
    documentation: bool,
    default_synonym: bool,
) -> list[Any]:
    """A group's or a client-metrics subscription's configs, (definition, value, whether it
    sets it) each, as ConfigHelper describes them: `own_source` for what it sets, else the
    default, which is named among the synonyms only with `default_synonym` (a group's is, a
    subscription's is not)."""
    out = []
    for definition, value, own in described:
        source = own_source if own else ConfigSource.DEFAULT_CONFIG
        listed = own or default_synonym
        out.append(
            Entry(
                name=definition.name,
                value=value,
                read_only=False,
                config_source=source,
                is_default=not own,
                is_sensitive=False,
                synonyms=[Synonym(name=definition.name, value=value, source=source)]
                if synonyms and listed
                else [],
                config_type=definition.type,
                documentation=definition.doc if documentation else None,
            )
        )
    return out


def _broker_entries(
    broker: Broker, keys: list[str] | None, synonyms: bool, documentation: bool, per_broker: bool
) -> list[Any]:
    """This broker's configs (`per_broker`), or those set at runtime for every broker (the
    resource named ""), as Kafka's ConfigHelper.createBrokerConfigEntry describes them."""
    config = broker.config
    dynamic = broker.topics.dynamic
    if per_broker:
        # Every config minicoord has, and every topic default Kafka's broker has, which can
        # be set at runtime here though minicoord has no config of its own for it
        # (unclean.leader.election.enable, log.index.interval.bytes, ...).
        known = config.known_names()
        names = known + sorted(set(DYNAMIC_BROKER_CONFIGS) - set(known))
        # The replication throttles exist once set, for this broker or every broker.
        names += sorted({n for own in dynamic.values() for n in own if n in BROKER_QUOTA_CONFIGS})
    else:
        # Kafka leaves out the values set for one broker alone (DYNAMIC_BROKER_CONFIG).
        dynamic = {"": dynamic.get("", {})}
        names = sorted(dynamic[""])
    out = []
    for name in names:
        if keys and name not in keys:
            continue
        sensitive = config.sensitive(name)
        found = [
            Synonym(name=n, value=None if sensitive else v, source=source)
            for n, v, source in config_synonyms(
                SYNONYM_CHAINS.get(name, (name,)),
                lambda n: broker_values(config, dynamic, n),
                name,
            )
        ]
        source = found[0].source if found else ConfigSource.DEFAULT_CONFIG
        out.append(
            Entry(
                name=name,
                # Kafka never sends a password's value back, set or not.
                value=None if sensitive else _value(config, dynamic, name),
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                config_source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                is_sensitive=sensitive,
                synonyms=found if synonyms else [],
                config_type=_broker_type(config, name, sensitive),
                documentation=broker_doc(name) if documentation else None,
            )
        )
    return out


def _value(config: Config, dynamic: dict[str, dict[str, str]], name: str) -> str | None:
    """A broker config's value: set at runtime (for this broker, then for all), else at start
    or by default."""
    for resource in (str(config.broker_id), ""):
        if name in dynamic.get(resource, {}):
            return dynamic[resource][name]
    value = config.value_of(name)
    return broker_default(name) if value is None else value


# Broker configs whose Kafka type (their ConfigDef in KafkaConfig, ServerLogConfigs,
# GroupCoordinatorConfig, SocketServerConfigs, ...) is not the one their value suggests:
# an int Kafka defines as INT rather than LONG, and the comma-separated lists.
_INT_CONFIGS = frozenset(
    {
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.initial.rebalance.delay.ms",
        "group.max.size",
        "offsets.topic.num.partitions",
        "offset.metadata.max.bytes",
        "num.partitions",
        "socket.request.max.bytes",
        "max.connections",
        "queued.max.requests",
        "max.request.partition.size.limit",
        "broker.id",
        "node.id",
        "offsets.topic.segment.bytes",
        "offsets.retention.minutes",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
        "group.consumer.max.size",
        "group.consumer.assignment.interval.ms",
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
        "message.max.bytes",
        "log.segment.bytes",
        "log.retention.minutes",
        "log.retention.hours",
        "log.roll.hours",
        "transaction.state.log.min.isr",
        "default.replication.factor",
        "min.insync.replicas",
        "producer.id.expiration.ms",
        "producer.id.expiration.check.interval.ms",
        "sasl.server.max.receive.size",
    }
)
_LIST_CONFIGS = frozenset(
    {
        "group.consumer.assignors",
        "log.cleanup.policy",
        "ssl.enabled.protocols",
        "sasl.enabled.mechanisms",
        "group.coordinator.rebalance.protocols",
        "process.roles",
    }
)
_SHORT_CONFIGS = frozenset(
    {"offsets.topic.replication.factor", "transaction.state.log.replication.factor"}
)


def _broker_type(config: Config, name: str, sensitive: bool) -> ConfigType:
    if sensitive:
        return ConfigType.PASSWORD
    if name in _INT_CONFIGS:
        return ConfigType.INT
    if name in _LIST_CONFIGS:
        return ConfigType.LIST
    if name in _SHORT_CONFIGS:
        return ConfigType.SHORT
    if name not in config.known_names():
        # A topic default minicoord has no field for, or a replication throttle.
        return RUNTIME_BROKER_CONFIGS[name].type
    value = getattr(config, name.replace(".", "_"))
    # The configs whose Kafka default is null are LONGs (log.retention.ms, log.roll.ms...).
    return ConfigType.LONG if value is None else _type_of(value)


def _type_of(value: Any) -> ConfigType:
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.LONG
    if isinstance(value, float):
        return ConfigType.DOUBLE
    return ConfigType.STRING


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
