"""The broker's side of topic configs: each topic config's broker synonyms and their values.

A topic config with no override of its own takes the value of its broker synonyms
(`log.retention.ms`, then `.minutes`, then `.hours` for `retention.ms`), set at runtime for
this broker or for every broker, or at start, else Kafka's default; DescribeConfigs lists
them as Kafka's ConfigHelper.configSynonyms does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from minicoord.server.config import Config
from minicoord.server.java_numbers import java_integer
from minicoord.server.topic_config_defs import (
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    ConfigType,
)

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

# The replication throttles of Kafka's QuotaConfig.brokerQuotaConfigs, in bytes per second:
# configs that exist only when set at runtime, for one broker or every broker
# (`kafka-reassign-partitions --throttle` sets the first two and `--verify` deletes them). A
# single node replicates nothing, so here, as on a one-broker Kafka, they slow nothing; they
# are kept and described. Kafka's DescribeConfigs lists them only once set, and read-only
# (they are not among DynamicBrokerConfig.AllDynamicConfigs).
BROKER_QUOTA_CONFIGS = {
    name: ConfigDef(name, ConfigType.LONG, str(LONG_MAX), doc, minimum=0)
    for name, doc in (
        ("leader.replication.throttled.rate", "the bytes per second leaders may send to the "
         "followers of throttled replicas"),
        ("follower.replication.throttled.rate", "the bytes per second followers may fetch for "
         "throttled replicas"),
        ("replica.alter.log.dirs.io.max.bytes.per.second", "the bytes per second a replica "
         "moving to another log directory may copy"),
    )
}  # fmt: skip
# Every broker config IncrementalAlterConfigs and AlterConfigs can set on a BROKER resource.
RUNTIME_BROKER_CONFIGS = {**DYNAMIC_BROKER_CONFIGS, **BROKER_QUOTA_CONFIGS}


def topic_config_of(name: str) -> ConfigDef | None:
    """The topic config a broker config is a default of (None if it is none's)."""
    return _BY_SYNONYM.get(name)


# DynamicBrokerConfig.brokerConfigSynonyms for the broker configs minicoord has: each config
# of a chain (log.retention.ms, .minutes, .hours; log.roll.ms, .hours) to the whole chain.
SYNONYM_CHAINS = {
    name: tuple(n for n, _ in chain)
    for d in TOPIC_CONFIGS.values()
    if len(chain := broker_synonyms(d)) > 1
    for name, _ in chain
}
