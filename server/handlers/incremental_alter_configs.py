"""IncrementalAlterConfigs (key 44), versions 0-1.

Topic configs can be set, deleted, appended to and subtracted from (the last two for list
configs such as cleanup.policy); the result is validated as at CreateTopics (INVALID_CONFIG)
and persisted as ConfigRecords before the answer. Group configs (resource type 32: a consumer
group's session timeout and heartbeat interval, server/group_configs.py) likewise. Broker
configs that are every topic's default (log.retention.ms, log.segment.bytes, ...) can be set
for this broker or for every broker, as Kafka's dynamic broker configs, and are persisted as
ConfigRecords too; any other broker config is set with --config at start (INVALID_REQUEST).
The broker's loggers (type 8) take a level, or lose theirs (server/broker_loggers.py).
Client-metrics subscriptions (type 16, server/client_metrics.py) are set and deleted, and
persisted as ConfigRecords, as Kafka's controller keeps them.
`validate_only` changes nothing. v1 is flexible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server import broker_loggers, client_metrics
from minicoord.server.broker_loggers import BROKER_LOGGER
from minicoord.server.broker_synonyms import RUNTIME_BROKER_CONFIGS
from minicoord.server.client_metrics import CLIENT_METRICS
from minicoord.server.coordinator.results import Result
from minicoord.server.group_configs import DEFS as GROUP_CONFIGS
from minicoord.server.group_configs import GROUP_RESOURCE
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.java_numbers import node_id
from minicoord.server.security import authorize
from minicoord.server.topic_config_defs import (
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigType,
    InvalidConfig,
    UnknownConfig,
    validate,
)

API_KEY = 44
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# A resource's new overrides from its current ones, the definitions of its kind's configs
# and the kind's name in messages ("topic", "group"); InvalidConfig to refuse.
Overrides = Callable[[dict[str, str], dict[str, ConfigDef], str], dict[str, str]]


def handle(ctx: RequestContext, request: Any) -> Any:
    return alter_resources(
        ctx,
        request,
        IncrementalAlterConfigsResponse,
        lambda r: lambda current, defs, kind: _altered(current, r.configs, defs, kind),
        _alter_loggers,
    )


def _alter_loggers(
    ctx: RequestContext, resource: Any, validate_only: bool
) -> tuple[ErrorCode, str | None] | None:
    """A BROKER_LOGGER resource, as RuntimeLoggerManager.applyChangesForResource: the
    cluster's AlterConfigs, this node's id, every change valid; None for other types."""
    if resource.resource_type != BROKER_LOGGER:
        return None
    refusal = authorize.config_refusal(
        ctx, BROKER_LOGGER, resource.resource_name, authorize.ALTER_CONFIGS
    )
    if refusal is not None:
        return refusal
    refusal = _other_node(
        resource.resource_name,
        ctx.broker.config.broker_id,
        "Unexpected node id. Expected {node}, but received {name}",
    )
    if refusal is not None:
        return refusal
    refusal = broker_loggers.check(resource.configs)
    if refusal is not None:
        return refusal
    if not validate_only:
        broker_loggers.apply(ctx.broker, resource.configs)
    return ErrorCode.NONE, None


def alter_resources(
    ctx: RequestContext,
    request: Any,
    response_cls: Any,
    overrides_for: Callable[[Any], Overrides],
    alter_other: Callable[[RequestContext, Any, bool], tuple[ErrorCode, str | None] | None]
    | None = None,
) -> Any:
    """Alter each resource of an AlterConfigs or IncrementalAlterConfigs request, the new
    overrides of each made by `overrides_for(resource)` (see alter_resource), and answer
    once the ConfigRecords are written. `alter_other` alters a resource that has no
    overrides (a logger) and answers for it, or returns None."""
    responses = []
    named = Counter((r.resource_type, r.resource_name) for r in request.resources)
    for r in request.resources:
        refusal = _malformed(r, named)
        if refusal is None and alter_other is not None:
            refusal = alter_other(ctx, r, request.validate_only)
        error, message = refusal or alter_resource(
            ctx, r.resource_type, r.resource_name, overrides_for(r), request.validate_only
        )
        responses.append(
            response_cls.AlterConfigsResourceResponse(
                error_code=error,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    response = response_cls(version=ctx.version, throttle_time_ms=0, responses=responses)
    parked = ctx.park(lambda _: response)
    ctx.broker.apply(Result(None, [], []), parked)
    return parked


def _malformed(resource: Any, named: Counter[tuple[int, str]]) -> tuple[ErrorCode, str] | None:
    """What Kafka's ConfigAdminManager.preprocess refuses before anything else: a resource
    named twice (each time), a config named twice in it, a null value but to DELETE."""
    if named[resource.resource_type, resource.resource_name] > 1:
        return ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    nulls = [
        c.name
        for c in resource.configs
        if c.value is None and getattr(c, "config_operation", SET) != DELETE
    ]
    if nulls:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
    return None


def alter_resource(
    ctx: RequestContext,
    resource_type: int,
    name: str,
    overrides_of: Overrides,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """Give a topic (or group) the overrides `overrides_of` makes of its current ones
    (raising InvalidConfig to refuse), validated as at CreateTopics (as Kafka's GroupConfig
    checks them); the error and message to answer."""
    broker = ctx.broker
    refusal = authorize.config_refusal(ctx, resource_type, name, authorize.ALTER_CONFIGS)
    if refusal is not None:
        return refusal
    if resource_type == GROUP_RESOURCE:
        if not name:
            # ControllerConfigurationValidator.validateGroupName's words.
            return ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
        store = broker.coordinator.group_configs
        try:
            overrides = overrides_of(dict(store.overrides.get(name, {})), GROUP_CONFIGS, "group")
            store.check(overrides)
        except InvalidConfig as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if not validate_only:
            broker.alter_group_configs(name, overrides)
        return ErrorCode.NONE, None
    if resource_type == RESOURCE_BROKER:
        return _alter_broker(ctx, name, overrides_of, validate_only)
    if resource_type == CLIENT_METRICS:
        return _alter_client_metrics(ctx, name, overrides_of, validate_only)
    if resource_type != RESOURCE_TOPIC:
        # Legacy AlterConfigs does not take BROKER_LOGGER either (ConfigAdminManager).
        return ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}"
    topic = broker.topics.get(name)
    if topic is None:
        # QuorumController's words (the legacy AlterConfigs goes the same way).
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if topic.internal:
        return (
            ErrorCode.INVALID_REQUEST,
            f"minicoord's internal topic {topic.name} takes its configs from the broker's "
            "(offsets.topic.*, log.cleaner.*): set them with --config at start",
        )
    try:
        overrides = overrides_of(
            dict(broker.topics.config_of(topic).overrides), TOPIC_CONFIGS, "topic"
        )
        validate(overrides)
    except InvalidConfig as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if not validate_only:
        broker.alter_topic_configs(topic, overrides)
    return ErrorCode.NONE, None


def _alter_broker(
    ctx: RequestContext, name: str, overrides_of: Overrides, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Broker configs set at runtime, for this broker (its id) or every broker (""): the
    topic defaults and the replication throttles (RUNTIME_BROKER_CONFIGS), checked as Kafka's
    broker checks a change before it goes to the controller, with its words."""
    broker = ctx.broker
    node = broker.config.broker_id
    if name:
        refusal = _other_node(
            name, node, "Unexpected broker id, expected {node}, but received {name}"
        )
        if refusal is not None:
            return refusal
    resource = f"ConfigResource(type=BROKER, name='{name}')"
    key = str(node) if name else ""
    current = broker.topics.dynamic.get(key, {})
    try:
        overrides = overrides_of(dict(current), RUNTIME_BROKER_CONFIGS, "broker")
    except UnknownConfig as exc:
        # Kafka's refusal of a config that is not dynamic: minicoord changes at runtime only
        # what every topic takes as its default, and the replication throttles.
        return (
            ErrorCode.INVALID_REQUEST,
            f"Invalid config value for resource {resource}: Cannot update these configs "
            f"dynamically: Set({exc.name})",
        )
    except InvalidConfig as exc:
        return ErrorCode.INVALID_REQUEST, f"Invalid config value for resource {resource}: {exc}"
    for config, value in overrides.items():
        try:
            RUNTIME_BROKER_CONFIGS[config].parse(value)
        except ValueError as exc:
            return ErrorCode.INVALID_REQUEST, f"Invalid config value for resource {resource}: {exc}"
    if not validate_only:
        broker.alter_broker_configs(key, overrides)
    return ErrorCode.NONE, None


def _alter_client_metrics(
    ctx: RequestContext, name: str, overrides_of: Overrides, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """A client-metrics subscription (server/client_metrics.py), checked as Kafka's
    controller checks one, with its words and codes: INVALID_REQUEST for an unknown config, an
    interval out of range or no name, INVALID_CONFIG for what does not parse."""
    if not name:
        return ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"
    broker = ctx.broker
    current = broker.client_metrics.overrides.get(name, {})
    try:
        configs = overrides_of(dict(current), client_metrics.DEFS, "client metrics")
    except UnknownConfig as exc:
        return ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {exc.name}"
    except InvalidConfig as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    refusal = client_metrics.check(configs)
    if refusal is not None:
        return refusal
    if not validate_only:
        broker.alter_client_metrics(name, configs)
    return ErrorCode.NONE, None


def _other_node(name: str, node: int, mismatch: str) -> tuple[ErrorCode, str] | None:
    """The refusal of a resource naming a node other than this one (`mismatch`: Kafka's words
    for it, with {node} and {name}); its id read as Java's Integer.parseInt reads it."""
    named = node_id(name)
    if named is None:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
    if named != node:
        return ErrorCode.INVALID_REQUEST, mismatch.format(node=node, name=name)
    return None


def _altered(
    overrides: dict[str, str], changes: Any, defs: dict[str, ConfigDef], kind: str
) -> dict[str, str]:
    for c in changes:
        definition = defs.get(c.name)
        op = c.config_operation
        if definition is None and op == DELETE and c.name not in overrides:
            # Deleting what is not there changes nothing, and Kafka's controller validates
            # only the configs a change leaves (ConfigurationControlManager): no error.
            continue
        # Kafka's controller knows the types of topic and broker configs alone
        # (KafkaRaftServer.configSchema): a client-metrics list is not splittable there.
        listed = (
            definition is not None
            and definition.type is ConfigType.LIST
            and kind in ("topic", "broker")
        )
        if op in (APPEND, SUBTRACT) and not listed:
            # Kafka's controller asks whether the key is a list before whether it is known.
            what = "APPEND" if op == APPEND else "SUBTRACT"
            raise InvalidConfig(f"Can't {what} to key {c.name} because its type is not LIST.")
        if definition is None:
            raise UnknownConfig(kind, c.name)
        if op == SET:
            overrides[c.name] = c.value  # not null: refused before (_malformed)
        elif op == DELETE:
            overrides.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            current = overrides.get(c.name, definition.default)
            items = [x for x in current.split(",") if x]
            given = [x.strip() for x in (c.value or "").split(",") if x.strip()]
            if op == APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            overrides[c.name] = ",".join(items)
        else:
            raise InvalidConfig(f"Unknown config operation {op}")
    return overrides


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
