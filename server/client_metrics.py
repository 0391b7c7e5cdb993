"""Client-metrics subscriptions: KIP-714's CLIENT_METRICS config resource (type 16).

A subscription is a name with up to three configs: `metrics` (the metric name prefixes a
client is asked to push), `interval.ms` (how often) and `match` (which clients, as
`param=regex` pairs). Kafka's admin tools (kafka-client-metrics.sh, Admin's
incrementalAlterConfigs and describeConfigs) set, read and list them; they are ConfigRecords
(resource type 16) in the cluster metadata log, as Kafka's controller keeps them, so they
outlive a restart. A subscription whose last config is deleted is gone, as in Kafka.

Checked as Kafka 4.1's ClientMetricsConfigs.validate checks them, with its words and error
codes. Kafka compiles a match pattern with java.util.regex; minicoord with Python's `re`, whose
syntax is Java's for the patterns a subscription names in practice (a literal, `.*`, classes,
alternation) but differs at the edges (Java refuses `a{`, Python reads it literally).

Subscriptions are stored and described, not served: minicoord answers neither
GetTelemetrySubscriptions nor PushTelemetry (keys 71 and 72), which Kafka too leaves out of
its ApiVersions unless a telemetry receiver is configured, so clients never ask.
"""

from __future__ import annotations

import re

from minicoord.protocol.errors import ErrorCode
from minicoord.server.resource_configs import ResourceConfigs
from minicoord.server.topic_config_defs import ConfigDef, ConfigType

# mr.RESOURCE_CLIENT_METRICS, written out (see server/group_configs.py).
CLIENT_METRICS = 16
METRICS, INTERVAL, MATCH = "metrics", "interval.ms", "match"
DEFS = {
    METRICS: ConfigDef(METRICS, ConfigType.LIST, "", "Telemetry metric name prefix list"),
    INTERVAL: ConfigDef(
        INTERVAL, ConfigType.INT, "300000", "Metrics push interval in milliseconds"
    ),
    MATCH: ConfigDef(MATCH, ConfigType.LIST, "", "Client match criteria"),
}
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_PARAMS = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)
_COMMA = re.compile(r"\s*,\s*")

# (error, message) of a refusal.
Refusal = tuple[ErrorCode, str]


def java_list(raw: str) -> list[str]:
    """A LIST config's items as Kafka's ConfigDef.parseType reads them: empty when blank,
    else split at commas with the spaces around them, empty items kept."""
    text = raw.strip()
    return _COMMA.split(text) if text else []


def check(configs: dict[str, str]) -> Refusal | None:
    """What is wrong with a subscription holding `configs` (all of them, after the change),
    in the order and words of Kafka's ClientMetricsConfigs.validate; None if nothing. (Its
    first check, of the name, the handler makes before it applies the change.)"""
    for key in configs:
        if key not in DEFS:
            return ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
    if INTERVAL in configs:
        try:
            interval = DEFS[INTERVAL].parse(configs[INTERVAL])
        except ValueError as exc:
            # ConfigDef.parse's ConfigException: INVALID_CONFIG.
            return ErrorCode.INVALID_CONFIG, str(exc)
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            return (
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for {INTERVAL}, interval must be between "
                f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
            )
    for pattern in java_list(configs.get(MATCH, "")):
        if not _legal_pattern(pattern):
            return ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
    return None


def _legal_pattern(pattern: str) -> bool:
    """`param=regex` with a known param, split as Java's String.split("=") splits (trailing
    empty parts dropped, so `client_id=` has one part), the regex compiling."""
    parts = pattern.split("=")
    while parts and not parts[-1]:
        parts.pop()
    if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
        return False
    try:
        re.compile(parts[1].strip())
    except re.error:
        return False
    return True


class ClientMetricsSubscriptions(ResourceConfigs):
    """Every subscription's configs as given (the raw values its records hold), by name in
    the order they were made."""

    resource_type = CLIENT_METRICS

    def describe(self, name: str, keys: list[str] | None) -> list[tuple[ConfigDef, str, bool]]:
        """(definition, value, whether the subscription sets it) of each config, in name
        order, for any name (Kafka describes one that does not exist with the defaults)."""
        own = self.overrides.get(name, {})
        return [
            (definition, _shown(definition, own.get(key, definition.default)), key in own)
            for key, definition in sorted(DEFS.items())
            if keys is None or key in keys
        ]


def _shown(definition: ConfigDef, raw: str) -> str:
    """A value as Kafka describes it: parsed and written back (ConfigDef.convertToString), so
    ` a , b` reads `a,b`; a stored value that does not parse (a log edited by hand) as it is."""
    if definition.type is ConfigType.LIST:
        return ",".join(java_list(raw))
    try:
        return str(definition.parse(raw))
    except ValueError:
        return raw
