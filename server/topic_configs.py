"""Each topic's effective configs: its own overrides over the broker's defaults.

A topic's value for a config is its own override if it has one, else the broker's value of
the config's broker synonyms (broker_synonyms.py), else Kafka's default. DescribeConfigs
reports every config with where its value came from, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.broker_synonyms import (
    BrokerDefaults,
    broker_synonyms,
    config_synonyms,
    in_topic_unit,
)
from minicoord.server.topic_config_defs import TOPIC_CONFIGS, ConfigDef, ConfigSource, ConfigType


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
