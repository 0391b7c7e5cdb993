"""Group configs: Kafka 4's GROUP config resource (type 32) for consumer groups.

A group may have its own `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`
over the broker's `group.consumer.*` ones (KIP-848), set with IncrementalAlterConfigs and read
with DescribeConfigs for any group id, existing or not, as in Kafka. The values are checked
against the broker's min and max, and the session must stay longer than the interval
(GroupConfig.validateValues); they are ConfigRecords (resource type 32) in the cluster
metadata log, so they outlive a restart. A member's session and the interval a heartbeat
answers with follow the group's values from its next heartbeat. Kafka's share-group configs
are not served here (minicoord has no share groups): naming one is an unknown config.
"""

from __future__ import annotations

from minicoord.server.config import Config
from minicoord.server.resource_configs import ResourceConfigs
from minicoord.server.topic_config_defs import ConfigDef, ConfigType, InvalidConfig

# mr.RESOURCE_GROUP, written out: reading an attribute of the lazily loaded module at import
# would load kafka-python's schema machinery at start (3 MB of RSS), not at first use.
GROUP_RESOURCE = 32
SESSION = "consumer.session.timeout.ms"
INTERVAL = "consumer.heartbeat.interval.ms"
INT_MAX = 2**31 - 1
DEFS = {
    SESSION: ConfigDef(
        SESSION, ConfigType.INT, "45000",
        "The timeout to detect client failures when using the consumer group protocol.",
        "group.consumer.session.timeout.ms", 1,
    ),
    INTERVAL: ConfigDef(
        INTERVAL, ConfigType.INT, "5000",
        "The heartbeat interval given to the members of a consumer group.",
        "group.consumer.heartbeat.interval.ms", 1,
    ),
}  # fmt: skip


class GroupConfigs(ResourceConfigs):
    """Every group's overrides; `session_ms` and `interval_ms` hold the effective values of
    the groups that have one, read by the consumer groups' heartbeat path."""

    resource_type = GROUP_RESOURCE

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.session_ms: dict[str, int] = {}
        self.interval_ms: dict[str, int] = {}

    def defaults(self) -> dict[str, int]:
        return {
            SESSION: self.config.group_consumer_session_timeout_ms,
            INTERVAL: self.config.group_consumer_heartbeat_interval_ms,
        }

    def describe(self, group: str, keys: list[str] | None) -> list[tuple[ConfigDef, str, bool]]:
        """(definition, value, whether the group sets it) of each config, in name order."""
        own = self.overrides.get(group, {})
        values = {**self.defaults(), **self.effective(group)}
        # As Kafka describes a group config: its parsed value (`+2000` reads 2000).
        return [
            (DEFS[name], str(values[name]), name in own)
            for name in sorted(DEFS)
            if keys is None or name in keys
        ]

    def effective(self, group: str) -> dict[str, int]:
        """The group's own values that apply (a stored value that does not parse is not)."""
        out = {}
        if group in self.session_ms:
            out[SESSION] = self.session_ms[group]
        if group in self.interval_ms:
            out[INTERVAL] = self.interval_ms[group]
        return out

    def check(self, overrides: dict[str, str]) -> None:
        """InvalidConfig naming the first problem, in Kafka's words."""
        for name in overrides:
            if name not in DEFS:
                raise InvalidConfig(f"Unknown group config name: {name}")
        values = self.defaults()
        for name, raw in overrides.items():
            try:
                values[name] = DEFS[name].parse(raw)
            except ValueError as exc:
                raise InvalidConfig(str(exc)) from None
        c = self.config
        interval, session = values[INTERVAL], values[SESSION]
        for name, value, low, high, low_key, high_key in (
            (INTERVAL, interval, c.group_consumer_min_heartbeat_interval_ms,
             c.group_consumer_max_heartbeat_interval_ms,
             "group.consumer.min.heartbeat.interval.ms",
             "group.consumer.max.heartbeat.interval.ms"),
            (SESSION, session, c.group_consumer_min_session_timeout_ms,
             c.group_consumer_max_session_timeout_ms,
             "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
        ):  # fmt: skip
            if value < low:
                raise InvalidConfig(f"{name} must be greater than or equal to {low_key}")
            if value > high:
                raise InvalidConfig(f"{name} must be less than or equal to {high_key}")
        if session <= interval:
            raise InvalidConfig(f"{SESSION} must be greater than {INTERVAL}")

    def _install(self, group: str, own: dict[str, str]) -> None:
        super()._install(group, own)
        for values, name in ((self.session_ms, SESSION), (self.interval_ms, INTERVAL)):
            raw = own.get(name)
            # Checked before it was written, and parsed as the check parsed it; a value that
            # does not parse anyway (a log edited by hand) is left to the broker's, never a
            # crash at start.
            try:
                parsed = DEFS[name].parse(raw) if raw is not None else None
            except ValueError:
                parsed = None
            if parsed is None:
                values.pop(group, None)
            else:
                values[group] = parsed
