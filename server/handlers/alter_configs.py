"""AlterConfigs (key 33), versions 0-2: the configs given become a topic's (or a group's,
server/group_configs.py) whole set.

The older form of IncrementalAlterConfigs, still served by Kafka 4 and the only one some
clients have (kafkajs' `admin.alterConfigs`). As Kafka's legacy path does, every override
not named is removed; a null value, a config named twice and a resource named twice are
INVALID_REQUEST; the result is validated as at CreateTopics (INVALID_CONFIG) and persisted
as ConfigRecords before the answer.
Broker configs: as IncrementalAlterConfigs takes them, the given set replacing the ones set at
runtime. `validate_only` changes nothing. v2 is flexible.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import AlterConfigsResponse
from minicoord.protocol.apis import SPECS
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.handlers.incremental_alter_configs import alter_resources
from minicoord.server.topic_config_defs import ConfigDef, UnknownConfig

API_KEY = 33


def handle(ctx: RequestContext, request: Any) -> Any:
    return alter_resources(
        ctx,
        request,
        AlterConfigsResponse,
        lambda r: lambda _current, defs, kind: _replacing(r.configs, defs, kind),
    )


def _replacing(configs: Any, defs: dict[str, ConfigDef], kind: str) -> dict[str, str]:
    overrides = {}
    for c in configs:
        if c.name not in defs:
            raise UnknownConfig(kind, c.name)
        overrides[c.name] = c.value  # not null: refused before (incremental_alter_configs)
    return overrides


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
