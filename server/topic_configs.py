"""Topic configs: Kafka 4's names, types, defaults and validation, and each topic's values.

A topic's value for a config is its own override if it has one, else the broker's value of
the config's broker synonyms (`log.retention.ms`, then `.minutes`, then `.hours` for
`retention.ms`), set at runtime for this broker or every broker, or at start, else Kafka's
default. DescribeConfigs reports every config with where its value came from, as Kafka does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from enum import IntEnum
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.config import Config, java_double, java_integer

LONG_MAX = 9_223_372_036_854_775_807
INT_MAX = 2_147_483_647


class ConfigType(IntEnum):
    """DescribeConfigs' config_type (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source (v1+)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    # Its broker synonym (the first of Kafka's ServerTopicConfigSynonyms): the default for
    # every topic where minicoord has that broker config, and named in DescribeConfigs.
    synonym: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    # A rule of Kafka's own validator beyond range and choices: what is wrong, or None.
    check: Callable[[Any], str | None] | None = None

    def parse(self, raw: str) -> Any:
        """The typed value; ValueError with Kafka's wording when it is not valid."""
        value: Any
        text = raw.strip()
        try:
            if self.type is ConfigType.BOOLEAN:
                if text.lower() not in ("true", "false"):
                    raise ValueError
                value = text.lower() == "true"
            elif self.type in (ConfigType.INT, ConfigType.LONG):
                value = java_integer(text)
                limit = INT_MAX if self.type is ConfigType.INT else LONG_MAX
                if not -limit - 1 <= value <= limit:
                    raise ValueError
            elif self.type is ConfigType.DOUBLE:
                value = java_double(text)
            elif self.type is ConfigType.LIST:
                value = tuple(part.strip() for part in text.split(",") if part.strip())
            else:
                value = text
        except ValueError:
            # ConfigDef.parseType's words.
            what = (
                "Expected value to be either true or false"
                if self.type is ConfigType.BOOLEAN
                else f"Not a number of type {self.type.name}"
            )
            raise ValueError(f"Invalid value {raw} for configuration {self.name}: {what}") from None
        items = value if self.type is ConfigType.LIST else (value,)
        for item in items:
            if self.choices and item not in self.choices:
                raise ValueError(
                    f"Invalid value {raw} for configuration {self.name}: String must be one "
                    f"of: {', '.join(self.choices)}"
                )
            if self.minimum is not None and item < self.minimum:
                raise ValueError(
                    f"Invalid value {raw} for configuration {self.name}: Value must be at "
                    f"least {_number(self.minimum)}"
                )
            if self.maximum is not None and item > self.maximum:
                raise ValueError(
                    f"Invalid value {raw} for configuration {self.name}: Value must be no "
                    f"more than {_number(self.maximum)}"
                )
        if self.check is not None:
            problem = self.check(value)
            if problem is not None:
                raise ValueError(f"Invalid value {raw} for configuration {self.name}: {problem}")
        return value


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _gzip_level(level: int) -> str | None:
    # CompressionType.GZIP's levelValidator (Deflater's levels, or its default -1).
    if level > 9 or (level < 1 and level != -1):
        return "Value must be between 1 and 9 or equal to -1"
    return None


def _throttled_replicas(name: str) -> Callable[[Any], str | None]:
    # ThrottledReplicaListValidator: `*`, or partition:broker pairs.
    def check(items: tuple[str, ...]) -> str | None:
        if "".join(items) == "*" or all(re.fullmatch(r"[0-9]+:[0-9]+", i) for i in items):
            return None
        return (
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )

    return check


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


B, S, INT, L, D, LI = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

# Kafka 4.0's topic configs (LogConfig), with their defaults.
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", LI, "delete", "The retention policy to use on log segments: "
              "delete (discard old segments) and/or compact (keep the latest value per key).",
              "log.cleanup.policy", choices=("compact", "delete")),
    ConfigDef("compression.type", S, "producer", "The final compression type for a topic.",
              "compression.type",
              choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", INT, "-1", "The compression level for gzip.",
              "compression.gzip.level", check=_gzip_level),
    ConfigDef("compression.lz4.level", INT, "9", "The compression level for lz4.",
              "compression.lz4.level", 1, 17),
    ConfigDef("compression.zstd.level", INT, "3", "The compression level for zstd.",
              "compression.zstd.level", -131072, 22),
    ConfigDef("delete.retention.ms", L, "86400000", "How long delete tombstone markers are "
              "retained for log compacted topics.", "log.cleaner.delete.retention.ms", 0),
    ConfigDef("file.delete.delay.ms", L, "60000", "The time to wait before deleting a file "
              "from the filesystem.", "log.segment.delete.delay.ms", 0),
    ConfigDef("flush.messages", L, str(LONG_MAX), "Messages after which a log is fsync'd.",
              "log.flush.interval.messages", 1),
    ConfigDef("flush.ms", L, str(LONG_MAX), "Time after which a log is fsync'd.",
              "log.flush.interval.ms", 0),
    ConfigDef("follower.replication.throttled.replicas", LI, "", "Replicas to throttle.",
              check=_throttled_replicas("follower.replication.throttled.replicas")),
    ConfigDef("index.interval.bytes", INT, "4096", "How frequently an offset index entry is "
              "added.", "log.index.interval.bytes", 0),
    ConfigDef("leader.replication.throttled.replicas", LI, "", "Replicas to throttle.",
              check=_throttled_replicas("leader.replication.throttled.replicas")),
    ConfigDef("local.retention.bytes", L, "-2", "Local log size kept with tiered storage.",
              "log.local.retention.bytes", -2),
    ConfigDef("local.retention.ms", L, "-2", "Local log age kept with tiered storage.",
              "log.local.retention.ms", -2),
    ConfigDef("max.compaction.lag.ms", L, str(LONG_MAX), "The maximum time a message will "
              "remain ineligible for compaction in the log.",
              "log.cleaner.max.compaction.lag.ms", 1),
    ConfigDef("max.message.bytes", INT, "1048588", "The largest record batch size allowed.",
              "message.max.bytes", 0),
    ConfigDef("message.timestamp.after.max.ms", L, "3600000", "How far in the future a "
              "CreateTime timestamp may be.", "log.message.timestamp.after.max.ms", 0),
    ConfigDef("message.timestamp.before.max.ms", L, str(LONG_MAX), "How far in the past a "
              "CreateTime timestamp may be.", "log.message.timestamp.before.max.ms", 0),
    ConfigDef("message.timestamp.type", S, "CreateTime", "Whether the timestamp in the message "
              "is message create time or log append time.", "log.message.timestamp.type",
              choices=("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", D, "0.5", "How frequently the log compactor will "
              "attempt to clean the log.", "log.cleaner.min.cleanable.ratio", 0, 1),
    ConfigDef("min.compaction.lag.ms", L, "0", "The minimum time a message will remain "
              "uncompacted in the log.", "log.cleaner.min.compaction.lag.ms", 0),
    ConfigDef("min.insync.replicas", INT, "1", "The minimum number of replicas that must "
              "acknowledge a write with acks=all.", "min.insync.replicas", 1),
    ConfigDef("preallocate", B, "false", "Preallocate the file on disk when creating a new "
              "log segment.", "log.preallocate"),
    ConfigDef("remote.log.copy.disable", B, "false", "Tiered storage: stop copying segments."),
    ConfigDef("remote.log.delete.on.disable", B, "false", "Tiered storage: delete on disable."),
    ConfigDef("remote.storage.enable", B, "false", "Tiered storage for the topic.",
              choices=()),
    ConfigDef("retention.bytes", L, "-1", "The maximum size a partition can grow to before "
              "old log segments are discarded.", "log.retention.bytes"),
    ConfigDef("retention.ms", L, "604800000", "The maximum time a log is retained before old "
              "log segments are discarded.", "log.retention.ms", -1),
    ConfigDef("segment.bytes", INT, "1073741824", "The segment file size for the log.",
              "log.segment.bytes", 1_048_576),
    ConfigDef("segment.index.bytes", INT, "10485760", "The size of the index that maps offsets "
              "to file positions.", "log.index.size.max.bytes", 4),
    ConfigDef("segment.jitter.ms", L, "0", "Jitter subtracted from segment.ms.",
              "log.roll.jitter.ms", 0),
    ConfigDef("segment.ms", L, "604800000", "The period after which the log rolls even if the "
              "segment file isn't full.", "log.roll.ms", 1),
    ConfigDef("unclean.leader.election.enable", B, "false", "Unclean leader election.",
              "unclean.leader.election.enable"),
)  # fmt: skip


class InvalidConfig(ValueError):
    pass


class UnknownConfig(InvalidConfig):
    """A config name the resource's kind does not have (`name`)."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"Unknown {kind} config name: {name}")
        self.name = name


def validate(overrides: Mapping[str, str | None]) -> dict[str, Any]:
    """Parsed overrides; InvalidConfig (INVALID_CONFIG) naming the first problem."""
    nulls = [k for k, v in overrides.items() if v is None]
    if nulls:
        raise InvalidConfig(f"Null value not supported for topic configs: {','.join(nulls)}")
    parsed: dict[str, Any] = {}
    for name, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        assert raw is not None
        try:
            parsed[name] = definition.parse(raw)
        except ValueError as exc:
            raise InvalidConfig(str(exc)) from None
    if parsed.get("remote.storage.enable"):
        raise InvalidConfig("Tiered storage is not enabled on this cluster")
    if parsed.get("min.compaction.lag.ms", 0) > parsed.get("max.compaction.lag.ms", LONG_MAX):
        raise InvalidConfig(
            "conflict topic config setting min.compaction.lag.ms > max.compaction.lag.ms"
        )
    return parsed


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    doc: str
    synonyms: tuple[tuple[str, str, ConfigSource], ...]


# compression.type's values and the batch attribute each stores ("producer" keeps the
# producer's).
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class TopicConfig:
    """One topic's effective configs, from its overrides over the broker's defaults."""

    __slots__ = (
        "_broker",
        "after_max_ms",
        "before_max_ms",
        "compact",
        "compression",
        "delete",
        "delete_retention_ms",
        "log_append_time",
        "max_compaction_lag_ms",
        "max_message_bytes",
        "min_cleanable_ratio",
        "min_compaction_lag_ms",
        "min_insync_replicas",
        "overrides",
        "retention_bytes",
        "retention_ms",
        "segment_bytes",
        "segment_ms",
    )

    def __init__(self, overrides: Mapping[str, str], broker: BrokerDefaults) -> None:
        self.overrides = dict(overrides)
        self._broker = broker
        v = self.value
        policy = v("cleanup.policy")
        self.compact = "compact" in policy
        self.delete = "delete" in policy
        self.retention_ms = v("retention.ms")
        self.retention_bytes = v("retention.bytes")
        self.segment_bytes = v("segment.bytes")
        self.segment_ms = v("segment.ms")
        self.max_message_bytes = v("max.message.bytes")
        self.log_append_time = v("message.timestamp.type") == "LogAppendTime"
        self.before_max_ms = v("message.timestamp.before.max.ms")
        self.after_max_ms = v("message.timestamp.after.max.ms")
        self.delete_retention_ms = v("delete.retention.ms")
        self.min_cleanable_ratio = v("min.cleanable.dirty.ratio")
        # The codec batches are stored under (None: as the producer sent them).
        self.compression = CODECS.get(v("compression.type"))
        self.min_compaction_lag_ms = v("min.compaction.lag.ms")
        self.max_compaction_lag_ms = v("max.compaction.lag.ms")
        self.min_insync_replicas = v("min.insync.replicas")

    @property
    def roll_ms(self) -> int:
        """How long an active segment may take records before it rolls: segment.ms, or for a
        compacted topic max.compaction.lag.ms if sooner (Kafka's LogConfig.maxSegmentMs)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    def value(self, name: str) -> Any:
        definition = TOPIC_CONFIGS[name]
        raw = self.overrides.get(name)
        if raw is None:
            raw = self._broker_value(definition)
        return definition.parse(raw)

    def _broker_value(self, definition: ConfigDef) -> str:
        # The first synonym with a value, as Kafka reads log.retention.ms before
        # log.retention.minutes before log.retention.hours.
        for name, factor in broker_synonyms(definition):
            found = self._broker.get(name)
            if found:
                return in_topic_unit(found[0][0], factor)
        return definition.default

    def describe(self, keys: list[str] | None = None) -> list[ConfigEntry]:
        out = []
        for name, definition in TOPIC_CONFIGS.items():
            if keys and name not in keys:
                continue
            synonyms: list[tuple[str, str, ConfigSource]] = []
            if name in self.overrides:
                synonyms.append((name, self.overrides[name], ConfigSource.TOPIC_CONFIG))
            chain = [synonym for synonym, _ in broker_synonyms(definition)]
            if chain:
                # From the first synonym's on: a retention set only in hours is listed
                # nowhere (log.retention.ms has no value), as Kafka lists it.
                synonyms += config_synonyms(chain, lambda n: self._broker.get(n, ()), chain[0])
            value = self.overrides.get(name)
            if value is None:
                value = self._broker_value(definition)
            out.append(
                ConfigEntry(
                    name,
                    _render(definition, value),
                    synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                    definition.type,
                    definition.doc,
                    tuple(synonyms),
                )
            )
        return out


def _render(definition: ConfigDef, raw: str) -> str:
    # Kafka reports values in their parsed form: lists comma-joined, numbers normalised.
    value = definition.parse(raw)
    if definition.type is ConfigType.LIST:
        return ",".join(value)
    if definition.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    return str(value)


# broker config name -> its (value, source) pairs, in the order of BROKER_LAYERS, for the
# broker configs that are topic defaults.
BrokerDefaults = Mapping[str, tuple[tuple[str, ConfigSource], ...]]
# Where a broker config's value comes from, the first that has one winning: set at runtime for
# this broker, for every broker (the cluster default), at start, Kafka's default.
BROKER_LAYERS = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DEFAULT_CONFIG,
)
# Broker synonyms minicoord has no config for whose Kafka default is null (log.roll.jitter.ms
# gives way to log.roll.jitter.hours; log.flush.interval.ms has none): Kafka's ConfigHelper
# names them only when set, never as DEFAULT_CONFIG. (log.retention.ms and log.roll.ms are
# minicoord's configs, null by default too.)
UNSET_BY_DEFAULT = frozenset(("log.roll.jitter.ms", "log.flush.interval.ms"))


def broker_defaults(config: Config, dynamic: Mapping[str, Mapping[str, str]]) -> BrokerDefaults:
    """The broker synonyms of topic configs, each with its values and where they come from,
    as Kafka's ConfigHelper.configSynonyms lists them (BROKER_LAYERS). `dynamic`: the values
    set at runtime, by resource name (this broker's id, or "" for every broker). For a broker
    config minicoord does not have, the default is the topic config's own (the same value in
    Kafka)."""
    out: dict[str, tuple[tuple[str, ConfigSource], ...]] = {}
    for definition in TOPIC_CONFIGS.values():
        for name, _ in broker_synonyms(definition):
            values = broker_values(config, dynamic, name)
            if values:
                out[name] = values
    return out


def broker_values(
    config: Config, dynamic: Mapping[str, Mapping[str, str]], name: str
) -> tuple[tuple[str, ConfigSource], ...]:
    """A broker config's values with where each comes from, in the order of BROKER_LAYERS
    (`dynamic` as for broker_defaults)."""
    values: list[tuple[str, ConfigSource]] = []
    own, every = dynamic.get(str(config.broker_id), {}), dynamic.get("", {})
    if name in own:
        values.append((own[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if name in every:
        values.append((every[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    value = config.value_of(name)
    if name in config.explicit and value is not None:
        values.append((value, ConfigSource.STATIC_BROKER_CONFIG))
    default = broker_default(name)
    if default is not None:
        values.append((default, ConfigSource.DEFAULT_CONFIG))
    return tuple(values)


def config_synonyms(
    chain: list[str] | tuple[str, ...],
    values_of: Callable[[str], Iterable[tuple[str, ConfigSource]]],
    own: str,
) -> list[tuple[str, str, ConfigSource]]:
    """Kafka's ConfigHelper.configSynonyms: each layer in turn (BROKER_LAYERS), every
    synonym of `chain` with a value in it, then everything before `own`'s first dropped."""
    listed = [
        (name, value, source)
        for wanted in BROKER_LAYERS
        for name in chain
        for value, source in values_of(name)
        if source is wanted
    ]
    while listed and listed[0][0] != own:
        listed.pop(0)
    return listed


def broker_default(name: str) -> str | None:
    """A broker config's default as Kafka prints it (None: null); for a topic config's broker
    synonym that minicoord has no config for, the topic config's default (Kafka's too)."""
    if name in UNSET_BY_DEFAULT:
        return None
    if name in Config.known_names():
        return Config.default_of(name)
    definition = _BY_SYNONYM.get(name)
    return None if definition is None else definition.default


# Kafka's ServerTopicConfigSynonyms where a topic config has more than one broker synonym:
# after ConfigDef.synonym, the others in the order Kafka reads them (the first set wins), each
# with the factor from its unit to the topic config's.
_LATER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.hours", 3_600_000),),
}


def broker_synonyms(definition: ConfigDef) -> tuple[tuple[str, int], ...]:
    """A topic config's broker synonyms, in Kafka's order, each with its factor to the topic
    config's unit."""
    if definition.synonym is None:
        return ()
    return ((definition.synonym, 1), *_LATER_SYNONYMS.get(definition.name, ()))


def in_topic_unit(raw: str, factor: int) -> str:
    """A broker synonym's value in its topic config's unit. A negative time is -1 (no limit),
    as Kafka's logRetentionTimeMillis makes a retention of minutes or hours below 0."""
    if factor == 1:
        return raw
    return str(max(java_integer(raw.strip()) * factor, -1))


# The broker configs that can be set at runtime (IncrementalAlterConfigs on a BROKER
# resource): as Kafka's DynamicLogConfig, each topic config's first broker synonym, which is
# every topic's default. Defined as their topic config is, under the broker's name.
DYNAMIC_BROKER_CONFIGS = {
    d.synonym: dataclasses.replace(d, name=d.synonym)
    for d in TOPIC_CONFIGS.values()
    if d.synonym is not None
}
_BY_SYNONYM = {name: d for d in TOPIC_CONFIGS.values() for name, _ in broker_synonyms(d)}
# DynamicBrokerConfig.brokerConfigSynonyms for the broker configs minicoord has: each config
# of a chain (log.retention.ms, .minutes, .hours; log.roll.ms, .hours) to the whole chain.
SYNONYM_CHAINS = {
    name: tuple(n for n, _ in chain)
    for d in TOPIC_CONFIGS.values()
    if len(chain := broker_synonyms(d)) > 1
    for name, _ in chain
}
