"""Group configs: Kafka 4's GROUP config resource (type 32) for consumer groups.

A group may have its own `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`
over the broker's `group.consumer.*` ones (KIP-848), set with IncrementalAlterConfigs and read
with DescribeConfigs for any group id, existing or not, as in Kafka. The values are checked
against the broker's min and max, and the session must stay longer than the interval
(GroupConfig.validateValues); they are ConfigRecords (resource type 32) in the cluster
metadata log, so they outlive a restart. A member's session and the interval a heartbeat
answers with follow the group's values from its next heartbeat.

Share groups (KIP-932) have their own: `share.session.timeout.ms`,
`share.heartbeat.interval.ms`, `share.record.lock.duration.ms` (each within the broker's
group.share.min/max ones), `share.auto.offset.reset` (latest, earliest or
by_duration:<ISO 8601 duration>) and `share.isolation.level`. The
isolation level takes only read_uncommitted here: minicoord's share fetches do not leave out
aborted transactions, so read_committed is refused rather than not kept.
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
SHARE_SESSION = "share.session.timeout.ms"
SHARE_INTERVAL = "share.heartbeat.interval.ms"
SHARE_LOCK = "share.record.lock.duration.ms"
SHARE_RESET = "share.auto.offset.reset"
SHARE_ISOLATION = "share.isolation.level"
INT_MAX = 2**31 - 1


def _reset_problem(value: str) -> str | None:
    if value in ("latest", "earliest"):
        return None
    if value.startswith("by_duration:"):
        from minicoord.server.data.shares import duration_ms

        try:
            if duration_ms(value[len("by_duration:") :]) >= 0:
                return None
        except ValueError:
            pass
    return "must be latest, earliest or by_duration:<ISO 8601 duration>"


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
    SHARE_SESSION: ConfigDef(
        SHARE_SESSION, ConfigType.INT, "45000",
        "The timeout to detect client failures when using the share group protocol.",
        "group.share.session.timeout.ms", 1,
    ),
    SHARE_INTERVAL: ConfigDef(
        SHARE_INTERVAL, ConfigType.INT, "5000",
        "The heartbeat interval given to the members of a share group.",
        "group.share.heartbeat.interval.ms", 1,
    ),
    SHARE_LOCK: ConfigDef(
        SHARE_LOCK, ConfigType.INT, "30000",
        "The record acquisition lock duration in milliseconds for share groups.",
        "group.share.record.lock.duration.ms", 1,
    ),
    SHARE_RESET: ConfigDef(
        SHARE_RESET, ConfigType.STRING, "latest",
        "The strategy to initialize the share-partition start offset.",
        check=_reset_problem,
    ),
    SHARE_ISOLATION: ConfigDef(
        SHARE_ISOLATION, ConfigType.STRING, "read_uncommitted",
        "Controls how to read records written transactionally (minicoord: read_uncommitted "
        "only).",
        choices=("read_uncommitted",),
    ),
}  # fmt: skip
# The int configs whose effective values the group paths read, each into its own dict.
_READ = (SESSION, INTERVAL, SHARE_SESSION, SHARE_INTERVAL, SHARE_LOCK)


class GroupConfigs(ResourceConfigs):
    """Every group's overrides; `session_ms` and `interval_ms` hold the effective values of
    the groups that have one, read by the consumer groups' heartbeat path."""

    resource_type = GROUP_RESOURCE

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.values: dict[str, dict[str, int]] = {name: {} for name in _READ}
        self.session_ms = self.values[SESSION]
        self.interval_ms = self.values[INTERVAL]
        self.share_session_ms = self.values[SHARE_SESSION]
        self.share_interval_ms = self.values[SHARE_INTERVAL]
        self.share_lock_ms = self.values[SHARE_LOCK]

    def defaults(self) -> dict[str, int | str]:
        c = self.config
        return {
            SESSION: c.group_consumer_session_timeout_ms,
            INTERVAL: c.group_consumer_heartbeat_interval_ms,
            SHARE_SESSION: c.group_share_session_timeout_ms,
            SHARE_INTERVAL: c.group_share_heartbeat_interval_ms,
            SHARE_LOCK: c.group_share_record_lock_duration_ms,
            SHARE_RESET: "latest",
            SHARE_ISOLATION: "read_uncommitted",
        }

    def share_reset(self, group: str) -> str:
        """The group's share.auto.offset.reset."""
        raw = self.overrides.get(group, {}).get(SHARE_RESET)
        return raw.strip() if raw is not None and _reset_problem(raw.strip()) is None else "latest"

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

    def effective(self, group: str) -> dict[str, int | str]:
        """The group's own values that apply (a stored value that does not parse is not)."""
        out: dict[str, int | str] = {
            name: values[group] for name, values in self.values.items() if group in values
        }
        own = self.overrides.get(group, {})
        if SHARE_RESET in own:
            out[SHARE_RESET] = self.share_reset(group)
        if SHARE_ISOLATION in own:
            out[SHARE_ISOLATION] = own[SHARE_ISOLATION].strip()
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
        share_interval, share_session = values[SHARE_INTERVAL], values[SHARE_SESSION]
        for name, value, low, high, low_key, high_key in (
            (INTERVAL, interval, c.group_consumer_min_heartbeat_interval_ms,
             c.group_consumer_max_heartbeat_interval_ms,
             "group.consumer.min.heartbeat.interval.ms",
             "group.consumer.max.heartbeat.interval.ms"),
            (SESSION, session, c.group_consumer_min_session_timeout_ms,
             c.group_consumer_max_session_timeout_ms,
             "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
            (SHARE_INTERVAL, share_interval, c.group_share_min_heartbeat_interval_ms,
             c.group_share_max_heartbeat_interval_ms,
             "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
            (SHARE_SESSION, share_session, c.group_share_min_session_timeout_ms,
             c.group_share_max_session_timeout_ms,
             "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
            (SHARE_LOCK, values[SHARE_LOCK], c.group_share_min_record_lock_duration_ms,
             c.group_share_max_record_lock_duration_ms,
             "group.share.min.record.lock.duration.ms",
             "group.share.max.record.lock.duration.ms"),
        ):  # fmt: skip
            if value < low:
                raise InvalidConfig(f"{name} must be greater than or equal to {low_key}")
            if value > high:
                raise InvalidConfig(f"{name} must be less than or equal to {high_key}")
        if session <= interval:
            raise InvalidConfig(f"{SESSION} must be greater than {INTERVAL}")
        if share_session <= share_interval:  # type: ignore[operator]
            raise InvalidConfig(f"{SHARE_SESSION} must be greater than {SHARE_INTERVAL}")

    def _install(self, group: str, own: dict[str, str]) -> None:
        super()._install(group, own)
        for name, values in self.values.items():
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
