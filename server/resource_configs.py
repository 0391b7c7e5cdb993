"""The configs of one kind of config resource kept as ConfigRecords in the cluster metadata log:
the groups' (server/group_configs.py) and the client-metrics subscriptions'
(server/client_metrics.py). Each resource's configs are the raw values given, as Kafka's
controller keeps them; a resource with none left is gone."""

from __future__ import annotations

from typing import Any, ClassVar

from minicoord.protocol import metadata_records as mr


class ResourceConfigs:
    """Every resource's configs, by name in the order the resources were first given one."""

    resource_type: ClassVar[int]

    def __init__(self) -> None:
        self.overrides: dict[str, dict[str, str]] = {}

    def __len__(self) -> int:
        """How many configs are set, over all resources (a record each)."""
        return sum(len(own) for own in self.overrides.values())

    def set(self, name: str, configs: dict[str, str]) -> list[bytes]:
        """Replace the resource's configs (checked) by `configs`; the records to persist."""
        current = self.overrides.get(name, {})
        records = [self._record(name, k, None) for k in current if k not in configs]
        records += [self._record(name, k, v) for k, v in configs.items() if current.get(k) != v]
        self._install(name, dict(configs))
        return records

    def snapshot(self) -> list[bytes]:
        """Records that set every resource's configs as they are now."""
        return [self._record(n, k, v) for n, own in self.overrides.items() for k, v in own.items()]

    def replay(self, record: Any) -> None:
        """A ConfigRecord of this kind, read back from the metadata log at start."""
        own = dict(self.overrides.get(record.resource_name, {}))
        if record.value is None:
            own.pop(record.name, None)
        else:
            own[record.name] = record.value
        self._install(record.resource_name, own)

    def _install(self, name: str, own: dict[str, str]) -> None:
        if own:
            self.overrides[name] = own
        else:
            self.overrides.pop(name, None)

    def _record(self, name: str, key: str, value: str | None) -> bytes:
        return mr.encode(
            mr.ConfigRecord(
                resource_type=self.resource_type, resource_name=name, name=key, value=value
            )
        )
