"""IncrementalAlterConfigs (key 44), versions 0-1.

Topic configs can be set, deleted, appended to and subtracted from (the last two for list
configs such as cleanup.policy); the result is validated as at CreateTopics (INVALID_CONFIG)
and persisted as ConfigRecords before the answer. `validate_only` changes nothing. Broker
configs are static here (set with --config at start): altering them is INVALID_REQUEST.
v1 is flexible.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topic_configs import TOPIC_CONFIGS, ConfigType, InvalidConfig, validate

API_KEY = 44
RESOURCE_TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    responses = []
    for r in request.resources:
        error, message = ErrorCode.NONE, None
        topic = broker.topics.get(r.resource_name) if r.resource_type == RESOURCE_TOPIC else None
        refusal = authorize.config_refusal(
            ctx, r.resource_type, r.resource_name, authorize.ALTER_CONFIGS
        )
        if refusal is not None:
            error, message = refusal
        elif r.resource_type != RESOURCE_TOPIC:
            error = ErrorCode.INVALID_REQUEST
            message = "minicoord's broker configs are static: set them with --config at start"
        elif topic is None or topic.internal:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            message = f"Topic {r.resource_name} does not exist"
        else:
            try:
                overrides = _altered(dict(broker.topics.config_of(topic).overrides), r.configs)
                validate(overrides)
            except InvalidConfig as exc:
                error, message = ErrorCode.INVALID_CONFIG, str(exc)
            else:
                if not request.validate_only:
                    broker.alter_topic_configs(topic, overrides)
        responses.append(
            Response(
                error_code=error,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    response = IncrementalAlterConfigsResponse(
        version=ctx.version, throttle_time_ms=0, responses=responses
    )
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)
    return parked


def _altered(overrides: dict[str, str], changes: Any) -> dict[str, str]:
    for c in changes:
        definition = TOPIC_CONFIGS.get(c.name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {c.name}")
        op = c.config_operation
        if op == SET:
            if c.value is None:
                raise InvalidConfig(f"Null value not supported for topic configs: {c.name}")
            overrides[c.name] = c.value
        elif op == DELETE:
            overrides.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if definition.type is not ConfigType.LIST:
                what = "APPEND" if op == APPEND else "SUBTRACT"
                raise InvalidConfig(f"Can't {what} to key {c.name} because its type is not LIST.")
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
