"""Kafka 4's topic configs: their names, types, defaults and validation.

The definitions are shared with the other kinds of config that Kafka defines the same way
(group configs, the broker configs that are topic defaults); a topic's effective values are
in topic_configs.py, the broker's side of them in broker_synonyms.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.java_numbers import java_double, java_integer

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
    CLIENT_METRICS_CONFIG = 7
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
    # LogConfig's words for both.
    if parsed.get("remote.storage.enable"):
        raise InvalidConfig(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage."
        )
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if min_lag > max_lag:
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})"
        )
    return parsed
