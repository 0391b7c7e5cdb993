"""Broker configs set at runtime (Kafka's dynamic broker configs, KIP-226): the topic defaults
(log.retention.ms, log.segment.bytes, ...) for this broker or for every broker, through
IncrementalAlterConfigs and AlterConfigs on a BROKER resource, persisted in the metadata log.
Each topic without its own override follows at once; DescribeConfigs reports the layers as
Kafka's ConfigHelper does (set for this broker, for every broker, at start, the default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from datakit import (
    compact_offline,
    describe_configs,
    incremental_alter,
    legacy_alter,
    offline_log,
)
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import EmbeddedServer, running

BROKER, TOPIC = 4, 2
SET, DELETE = 0, 1
DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


async def _ask(server: EmbeddedServer, request: Any) -> Any:
    host, port = server.bootstrap.rsplit(":", 1)
    async with await ProtocolClient.connect(host, int(port)) as client:
        return await client.request(request, request.version)


def _altered(answer: Any) -> list[tuple[int, str | None]]:
    return [(r.error_code, r.error_message) for r in answer.responses]


def _described(answer: Any) -> dict[str, tuple[Any, ...]]:
    (result,) = answer.results
    assert result.error_code == 0, result.error_message
    return {
        c.name: (
            c.value,
            c.config_source,
            c.read_only,
            [(s.name, s.value, s.source) for s in c.synonyms],
        )
        for c in result.configs
    }


# log.retention.ms set for this broker and for every broker, the minutes at start: each layer
# as Kafka's ConfigHelper lists it, for a topic's retention.ms and for the broker's own.
RETENTION_LAYERS = [
    ("log.retention.ms", "2000", DYN_BROKER),
    ("log.retention.ms", "1000", DYN_DEFAULT),
    ("log.retention.minutes", "30", STATIC),
    ("log.retention.hours", "168", DEFAULT),
]


@pytest.mark.asyncio
async def test_topic_defaults_set_at_runtime_reach_every_topic_without_its_own() -> None:
    with running({"log.retention.minutes": "30"}, topics=[("plain", 1), ("own", 1)]) as server:
        own = incremental_alter(TOPIC, ("own", [("retention.ms", SET, "5")]))
        assert _altered(await _ask(server, own)) == [(0, None)]
        every = incremental_alter(
            BROKER, ("", [("log.retention.ms", SET, "1000"), ("log.roll.ms", SET, "3000")])
        )
        assert _altered(await _ask(server, every)) == [(0, None)]
        this = incremental_alter(BROKER, ("0", [("log.retention.ms", SET, "2000")]))
        assert _altered(await _ask(server, this)) == [(0, None)]

        keys = ["retention.ms", "segment.ms"]
        plain = _described(await _ask(server, describe_configs(TOPIC, ["plain"], keys, True)))
        assert plain["retention.ms"] == (
            "2000",
            DYN_BROKER,
            False,
            RETENTION_LAYERS,
        )
        assert plain["segment.ms"][:2] == ("3000", DYN_DEFAULT)
        mine = _described(await _ask(server, describe_configs(TOPIC, ["own"], keys, True)))
        assert mine["retention.ms"][:2] == ("5", 1)  # its own override still wins
        # The logs roll by the new age at once.
        rolls = server.call(
            lambda: [
                server.server.broker.data.partitions[(t, 0)].log.segment_ms
                for t in ("plain", "own")
            ]
        )
        assert rolls == [3000, 3000]

        broker = _described(await _ask(server, describe_configs(BROKER, ["0"], synonyms=True)))
        assert broker["log.retention.ms"] == (
            "2000",
            DYN_BROKER,
            False,
            RETENTION_LAYERS,
        )
        assert broker["log.retention.minutes"][:3] == ("30", STATIC, True)  # not dynamic
        # The cluster default resource describes what was set for every broker, and no more.
        default = _described(await _ask(server, describe_configs(BROKER, [""], synonyms=True)))
        # (Their synonyms: every layer but this broker's own, as Kafka lists them there.)
        assert default == {
            "log.retention.ms": (
                "1000",
                DYN_DEFAULT,
                False,
                [
                    ("log.retention.ms", "1000", DYN_DEFAULT),
                    ("log.retention.minutes", "30", STATIC),
                    ("log.retention.hours", "168", DEFAULT),
                ],
            ),
            "log.roll.ms": (
                "3000",
                DYN_DEFAULT,
                False,
                [("log.roll.ms", "3000", DYN_DEFAULT), ("log.roll.hours", "168", DEFAULT)],
            ),
        }

        # Deleted again: the next layer shows through.
        undo = incremental_alter(BROKER, ("0", [("log.retention.ms", DELETE, None)]))
        assert _altered(await _ask(server, undo)) == [(0, None)]
        plain = _described(await _ask(server, describe_configs(TOPIC, ["plain"], keys, True)))
        assert plain["retention.ms"][:2] == ("1000", DYN_DEFAULT)
        # The legacy AlterConfigs replaces the whole set of the resource.
        replace = legacy_alter(BROKER, "", {"log.segment.bytes": "2097152"})
        assert _altered(await _ask(server, replace)) == [(0, None)]
        default = _described(await _ask(server, describe_configs(BROKER, [""])))
        assert {name: v[0] for name, v in default.items()} == {"log.segment.bytes": "2097152"}
        segment = server.call(
            lambda: server.server.broker.data.partitions[("plain", 0)].log.segment_bytes
        )
        assert segment == 2097152


@pytest.mark.asyncio
async def test_what_cannot_change_at_runtime_is_refused_in_kafkas_words() -> None:
    with running(topics=[("t", 1)]) as server:
        resource = "Invalid config value for resource ConfigResource(type=BROKER, name='')"
        cases = [
            # Kafka's own refusal: the hours are read at start only (not dynamic).
            (
                ("", [("log.retention.hours", SET, "1")]),
                (
                    ErrorCode.INVALID_REQUEST,
                    f"{resource}: Cannot update these configs dynamically: "
                    "Set(log.retention.hours)",
                ),
            ),
            # A config Kafka changes at runtime but minicoord does not.
            (
                ("", [("num.io.threads", SET, "4")]),
                (
                    ErrorCode.INVALID_REQUEST,
                    f"{resource}: Cannot update these configs dynamically: Set(num.io.threads)",
                ),
            ),
            (
                ("", [("log.retention.ms", SET, "soon")]),
                (
                    ErrorCode.INVALID_REQUEST,
                    f"{resource}: Invalid value soon for configuration log.retention.ms: "
                    "Not a number of type LONG",
                ),
            ),
            (
                ("7", [("log.retention.ms", SET, "1")]),
                (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0, but received 7"),
            ),
            (
                ("x", [("log.retention.ms", SET, "1")]),
                (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
            ),
        ]
        for change, expected in cases:
            assert _altered(await _ask(server, incremental_alter(BROKER, change))) == [expected]
        checking = incremental_alter(BROKER, ("", [("log.retention.ms", SET, "1")]))
        checking.validate_only = True
        assert _altered(await _ask(server, checking)) == [(0, None)]
        assert server.call(lambda: server.server.broker.topics.dynamic) == {}


def test_set_at_runtime_they_outlive_a_restart_and_stock_admins_see_them(tmp_path: Path) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    def admin(server: EmbeddedServer) -> AdminClient:
        return AdminClient({"bootstrap.servers": server.bootstrap})

    with running(data_dir=tmp_path, topics=[("t", 1)]) as server:
        this = ConfigResource(
            ResourceType.BROKER,
            "0",
            incremental_configs=[
                ConfigEntry(
                    "log.retention.bytes", "4096", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        client = admin(server)  # kept: a dropped AdminClient fails its futures
        for future in client.incremental_alter_configs([this]).values():
            future.result(10)
    with running(data_dir=tmp_path) as server:
        topic = ConfigResource(ResourceType.TOPIC, "t")
        client = admin(server)
        [entries] = [f.result(10) for f in client.describe_configs([topic]).values()]
        entry = entries["retention.bytes"]
        assert (entry.value, entry.source) == ("4096", DYN_BROKER)
        assert (
            server.call(
                lambda: (
                    server.server.broker.topics.config_of(
                        server.server.broker.topics.get("t")
                    ).retention_bytes
                )
            )
            == 4096
        )


def test_a_kraft_node_id_names_the_broker_and_stock_admins_see_its_identity() -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    with running({"node.id": "3"}) as server:
        client = AdminClient({"bootstrap.servers": server.bootstrap})
        # The broker's id is node.id's: Metadata names it, DescribeConfigs answers to it.
        assert list(client.list_topics(timeout=10).brokers) == [3]
        resource = ConfigResource(ResourceType.BROKER, "3")
        [entries] = [f.result(10) for f in client.describe_configs([resource]).values()]
        got = {
            name: (entries[name].value, entries[name].source, entries[name].is_read_only)
            for name in ("node.id", "broker.id", "process.roles")
        }
        # KafkaConfig.populateSynonyms: node.id given sets broker.id, both static.
        assert got == {
            "node.id": ("3", STATIC, True),
            "broker.id": ("3", STATIC, True),
            "process.roles": ("broker,controller", DEFAULT, True),
        }


def _offsets_tombstones(data_dir: Path) -> int:
    return sum(
        "<tombstone>" in line
        for line in offline_log("dump", data_dir).splitlines()
        if line.startswith("topic=__consumer_offsets ")
    )


@pytest.mark.asyncio
async def test_offline_compaction_keeps_tombstones_as_long_as_the_runtime_retention_says(
    tmp_path: Path,
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    with running(data_dir=tmp_path, topics=[("t", 1)]) as server:
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "gone"})
        consumer.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
        consumer.close()
        client = AdminClient({"bootstrap.servers": server.bootstrap})
        for future in client.delete_consumer_groups(["gone"]).values():
            future.result(10)
    # The tombstones are younger than the default retention (a day): the cleaner keeps them,
    # offline as in the server.
    compact_offline(tmp_path)
    assert _offsets_tombstones(tmp_path) >= 1
    # Set at runtime for every broker, a retention of 0 is what the offline cleaner goes by
    # too, as the server's own would (a dynamic config outranks the static default).
    with running(data_dir=tmp_path) as server:
        every = incremental_alter(BROKER, ("", [("log.cleaner.delete.retention.ms", SET, "0")]))
        assert _altered(await _ask(server, every)) == [(0, None)]
    compact_offline(tmp_path)
    assert _offsets_tombstones(tmp_path) == 0


@pytest.mark.asyncio
async def test_broker_configs_are_documented_when_asked() -> None:
    # ConfigHelper.createBrokerConfigEntry: the documentation of every config, when asked.
    with running() as server:
        asked = describe_configs(BROKER, ["0"])
        asked.include_documentation = True
        (documented,) = (await _ask(server, asked)).results
        docs = {c.name: c.documentation for c in documented.configs}
        assert docs and all(docs.values()), [n for n, d in docs.items() if not d]
        assert docs["log.retention.hours"].startswith("The default of every topic's retention.ms")
        (plain,) = (await _ask(server, describe_configs(BROKER, ["0"]))).results
        assert {c.documentation for c in plain.configs} == {None}


@pytest.mark.asyncio
async def test_every_topic_default_kafka_has_is_listed_and_settable() -> None:
    # Kafka lists every broker config: the topic defaults minicoord has no field for too,
    # with their defaults, each settable at runtime here as there.
    with running() as server:
        listed = _described(await _ask(server, describe_configs(BROKER, ["0"], None, True)))
        assert listed["unclean.leader.election.enable"][:3] == ("false", DEFAULT, False)
        assert listed["log.flush.interval.ms"][:3] == (None, DEFAULT, False)  # null by default
        change = incremental_alter(BROKER, ("0", [("log.index.interval.bytes", SET, "8192")]))
        assert _altered(await _ask(server, change)) == [(0, None)]
        listed = _described(await _ask(server, describe_configs(BROKER, ["0"])))
        assert listed["log.index.interval.bytes"][:3] == ("8192", DYN_BROKER, False)


@pytest.mark.asyncio
async def test_replication_throttles_are_set_described_and_deleted_as_kafka_does() -> None:
    # What `kafka-reassign-partitions --execute --throttle` sets and `--verify` deletes: Kafka
    # keeps them as dynamic broker configs, lists them only once set, read-only, as LONGs.
    leader, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
    moves = "replica.alter.log.dirs.io.max.bytes.per.second"
    with running(topics=[("t", 1)]) as server:
        assert leader not in _described(await _ask(server, describe_configs(BROKER, ["0"])))
        change = ("0", [(leader, SET, "1000"), (follower, SET, "1000")])
        assert _altered(await _ask(server, incremental_alter(BROKER, change))) == [(0, None)]
        assert _altered(
            await _ask(server, incremental_alter(BROKER, ("", [(moves, SET, "5000")])))
        ) == [(0, None)]
        answer = await _ask(server, describe_configs(BROKER, ["0"], synonyms=True))
        described = _described(answer)
        assert described[leader] == ("1000", DYN_BROKER, True, [(leader, "1000", DYN_BROKER)])
        assert described[follower][:3] == ("1000", DYN_BROKER, True)
        assert described[moves] == ("5000", DYN_DEFAULT, True, [(moves, "5000", DYN_DEFAULT)])
        (result,) = answer.results
        assert {c.name: c.config_type for c in result.configs}[leader] == 5  # LONG
        # Every broker's set lists what was set for every broker only.
        assert list(_described(await _ask(server, describe_configs(BROKER, [""])))) == [moves]
        # Refused as Kafka's ConfigDef refuses them; nothing changes.
        resource = "Invalid config value for resource ConfigResource(type=BROKER, name='0')"
        refused = await _ask(server, incremental_alter(BROKER, ("0", [(leader, SET, "-1")])))
        assert _altered(refused) == [
            (
                ErrorCode.INVALID_REQUEST,
                f"{resource}: Invalid value -1 for configuration {leader}: Value must be at "
                "least 0",
            )
        ]
        change = ("0", [(leader, DELETE, None), (follower, DELETE, None)])
        assert _altered(await _ask(server, incremental_alter(BROKER, change))) == [(0, None)]
        described = _described(await _ask(server, describe_configs(BROKER, ["0"])))
        assert leader not in described and follower not in described
        assert described[moves][:2] == ("5000", DYN_DEFAULT)
        # No topic default moved.
        dynamic = server.call(lambda: server.server.broker.topics.dynamic)
        assert dynamic == {"": {moves: "5000"}}
