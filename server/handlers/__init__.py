"""One handler module per Kafka API; this registry is what ApiVersions advertises.

An API is served and advertised because its module is listed here, never through a
separate list that could drift from what is handled.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse
from minicoord.server.handlers import (
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)
from minicoord.server.handlers.base import Handler

MODULES = (
    api_versions,
    metadata,
    find_coordinator,
    create_topics,
    list_offsets,
    fetch,
    produce,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    init_producer_id,
    offset_for_leader_epoch,
    delete_topics,
    create_partitions,
    delete_records,
    describe_configs,
    incremental_alter_configs,
    consumer_group_heartbeat,
    consumer_group_describe,
)


class HandlerRegistry:
    def __init__(self, handlers: list[Handler]) -> None:
        self._by_key = {h.spec.key: h for h in handlers}
        self._api_versions = [
            ApiVersionsResponse.ApiVersion(
                api_key=h.spec.key, min_version=h.min_version, max_version=h.max_version
            )
            for h in sorted(handlers, key=lambda h: h.spec.key)
        ]

    @classmethod
    def default(cls) -> HandlerRegistry:
        return cls([m.HANDLER for m in MODULES])

    def get(self, api_key: int) -> Handler | None:
        return self._by_key.get(api_key)

    def api_versions(self) -> list[Any]:
        return self._api_versions

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._by_key.values())
