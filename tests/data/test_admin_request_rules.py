"""Admin requests Kafka refuses before acting, refused as Kafka refuses them: manual replica
assignments in CreateTopics (ReplicationControlManager) and malformed (Incremental)AlterConfigs
(ConfigAdminManager.preprocess). kafkajs and @platformatic/kafka send such requests as their
users write them."""

from __future__ import annotations

from typing import Any

import pytest
from datakit import create_topics, describe_configs, incremental_alter, legacy_alter, new_topic
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

TOPIC_RESOURCE = 2
SET, DELETE = 0, 1


BAD = ErrorCode.INVALID_REPLICA_ASSIGNMENT
CASES = [
    ("ok", [(0, [0]), (1, [0])], -1, -1, ErrorCode.NONE, None),
    ("nobroker", [(0, [5])], -1, -1, BAD, "includes broker 5, but no such broker"),
    ("twice", [(0, [0, 0])], -1, -1, BAD, "the broker 0 more than once"),
    ("empty", [(0, [])], -1, -1, BAD, "empty replica list"),
    ("gap", [(0, [0]), (2, [0])], -1, -1, BAD, "consecutive 0-based"),
    ("again", [(0, [0]), (0, [0])], -1, -1, BAD, "assignments for partition 0"),
    ("count", [(0, [0])], 2, -1, ErrorCode.INVALID_REQUEST, "numPartitions was not set"),
    ("factor", [(0, [0])], -1, 3, ErrorCode.INVALID_REQUEST, "replication factor was not"),
]  # fmt: skip


@pytest.mark.asyncio
async def test_manual_assignments_are_checked_as_kafkas_controller_checks_them() -> None:
    with running() as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            made = await client.request(
                create_topics(*(new_topic(name, n, a, rf=rf) for name, a, n, rf, _, _ in CASES)),
                7,
            )
            answers = {
                t.name: (t.error_code, t.error_message, t.num_partitions) for t in made.topics
            }
            for name, _, _, _, error, message in CASES:
                got_error, got_message, _ = answers[name]
                assert got_error == error, (name, got_message)
                assert message is None or message in got_message, (name, got_message)
            assert answers["ok"][2] == 2
            broker = server.server.broker
            topics = server.call(lambda: {t.name for t in broker.topics.user_topics()})
            assert "ok" in topics and not {n for n, *_ in CASES[1:]} & topics


RF = ErrorCode.INVALID_REPLICATION_FACTOR
# (name, partitions, replication factor, configs, error, message): Kafka's checks in Kafka's
# order (ControllerApis, then ReplicationControlManager: name, existence, configs, then the
# factor and the count), so that a "create if missing" with factor 3 hears the topic exists.
ORDER_CASES = [
    ("kept", 1, 3, None, ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'kept' already exists."),
    ("three", 1, 3, None, RF, "Unable to replicate the partition 3 time(s): The target "
     "replication factor of 3 cannot be reached because only 1 broker(s) are registered."),
    ("zero", 1, 0, None, RF, "Replication factor must be larger than 0, or -1 to use the "
     "default value."),
    ("nothing", 0, -1, None, ErrorCode.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    ("nothing-bad-config", 0, -1, {"no.such": "1"}, ErrorCode.INVALID_CONFIG, None),
    ("bad!", 1, 3, None, ErrorCode.INVALID_TOPIC_EXCEPTION, None),
    ("__cluster_metadata", 1, -1, None, ErrorCode.INVALID_REQUEST,
     "Creation of internal topic __cluster_metadata is prohibited."),
]  # fmt: skip


@pytest.mark.asyncio
async def test_new_topics_are_checked_in_kafkas_order_and_words() -> None:
    with running(topics=[("kept", 1)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            topics = (new_topic(n, p, configs=c, rf=rf) for n, p, rf, c, _, _ in ORDER_CASES)
            made = await client.request(create_topics(*topics), 7)
        answers = {t.name: (t.error_code, t.error_message) for t in made.topics}
        for name, _, _, _, error, message in ORDER_CASES:
            assert answers[name][0] == error, (name, answers[name])
            assert message is None or answers[name][1] == message, (name, answers[name])
        broker = server.server.broker
        assert server.call(lambda: sorted(t.name for t in broker.topics.user_topics())) == ["kept"]


@pytest.mark.asyncio
async def test_malformed_config_changes_are_invalid_request_and_change_nothing() -> None:
    with running(topics=[("t", 1), ("u", 1)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:

            async def incremental(*resources: Any) -> list[tuple[str, int, str | None]]:
                answer = await client.request(incremental_alter(TOPIC_RESOURCE, *resources), 1)
                return [(r.resource_name, r.error_code, r.error_message) for r in answer.responses]

            assert await incremental(
                ("t", [("retention.ms", SET, "5000"), ("retention.ms", SET, "6000")])
            ) == [("t", ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")]
            twice = "Each resource must appear at most once."
            assert await incremental(
                ("t", [("retention.ms", SET, "7000")]),
                ("t", [("retention.ms", SET, "8000")]),
                ("u", [("retention.ms", SET, "9000")]),
            ) == [
                ("t", ErrorCode.INVALID_REQUEST, twice),
                ("t", ErrorCode.INVALID_REQUEST, twice),
                ("u", ErrorCode.NONE, None),
            ]
            null = "Null value not supported for : retention.ms"
            assert await incremental(("t", [("retention.ms", SET, None)])) == [
                ("t", ErrorCode.INVALID_REQUEST, null)
            ]
            assert await incremental(("t", [("retention.ms", DELETE, None)])) == [
                ("t", ErrorCode.NONE, None)
            ]
            # Before the first group lookup creates it, the offsets topic does not exist.
            change = ("__consumer_offsets", [("retention.ms", SET, "1")])
            (absent,) = await incremental(change)
            assert absent[1] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            await client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 4)
            (internal,) = await incremental(change)
            assert internal[1] == ErrorCode.INVALID_REQUEST and "--config" in internal[2]
            answer = await client.request(
                legacy_alter(TOPIC_RESOURCE, "t", {"retention.ms": None}), 2
            )
            assert [(r.error_code, r.error_message) for r in answer.responses] == [
                (ErrorCode.INVALID_REQUEST, null)
            ]
        broker = server.server.broker
        overrides = server.call(
            lambda: {n: broker.topics.config_of(broker.topics.get(n)).overrides for n in "tu"}
        )
        assert overrides == {"t": {}, "u": {"retention.ms": "9000"}}


@pytest.mark.asyncio
async def test_config_values_are_checked_with_kafkas_validators_and_words() -> None:
    # LogConfig's validators (gzip levels, throttled-replica lists), ConfigDef.parseType's
    # words for a wrong type, and a DELETE of an unknown name changing nothing (no error).
    with running(topics=[("t", 1)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:

            async def incremental(*changes: Any) -> tuple[int, str | None]:
                answer = await client.request(incremental_alter(TOPIC_RESOURCE, ("t", changes)), 1)
                (r,) = answer.responses
                return r.error_code, r.error_message

            invalid = ErrorCode.INVALID_CONFIG
            assert await incremental(("compression.gzip.level", SET, "42")) == (
                invalid,
                "Invalid value 42 for configuration compression.gzip.level: Value must be "
                "between 1 and 9 or equal to -1",
            )
            assert await incremental(("compression.gzip.level", SET, "9")) == (0, None)
            code, message = await incremental(
                ("leader.replication.throttled.replicas", SET, "garbage")
            )
            assert code == invalid and message is not None and "must be the literal '*'" in message
            assert await incremental(("leader.replication.throttled.replicas", SET, "0:0")) == (
                0,
                None,
            )
            assert await incremental(("retention.ms", SET, "soon")) == (
                invalid,
                "Invalid value soon for configuration retention.ms: Not a number of type LONG",
            )
            # Java's Long.parseLong and Double.parseDouble, not Python's int() and float().
            for name, text in [
                ("retention.ms", "86_400_000"),
                ("min.cleanable.dirty.ratio", "nan"),
                ("min.cleanable.dirty.ratio", "0_5e-1"),
                ("min.cleanable.dirty.ratio", "inf"),
            ]:
                kind = "LONG" if name == "retention.ms" else "DOUBLE"
                assert await incremental((name, SET, text)) == (
                    invalid,
                    f"Invalid value {text} for configuration {name}: Not a number of type {kind}",
                )
            for name, text in [
                ("retention.ms", " +86400000 "),
                ("min.cleanable.dirty.ratio", "0.25d"),
                ("min.cleanable.dirty.ratio", ".5e-1"),
            ]:
                assert await incremental((name, SET, text)) == (0, None), text
            assert await incremental(("preallocate", SET, "yes")) == (
                invalid,
                "Invalid value yes for configuration preallocate: Expected value to be either "
                "true or false",
            )
            # LogConfig's cross-config rules, in its words.
            assert await incremental(
                ("min.compaction.lag.ms", SET, "100"), ("max.compaction.lag.ms", SET, "50")
            ) == (
                invalid,
                "conflict topic config setting min.compaction.lag.ms (100) > "
                "max.compaction.lag.ms (50)",
            )
            assert await incremental(("remote.storage.enable", SET, "true")) == (
                invalid,
                "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage.",
            )
            assert await incremental(("no.such.config", DELETE, None)) == (0, None)
            assert await incremental(("no.such.config", SET, "1")) == (
                invalid,
                "Unknown topic config name: no.such.config",
            )


@pytest.mark.asyncio
async def test_broker_resource_names_are_read_as_kafka_reads_them() -> None:
    # ConfigHelper.resourceNameToBrokerId: Java's Integer.parseInt ("00" is broker 0).
    with running() as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            names = ("0", "00", "abc", "5", "0_0", "2147483648", "\u0660")
            answer = await client.request(describe_configs(4, names, ["broker.id"]), 4)
            got = [(r.resource_name, r.error_code, r.error_message) for r in answer.results]
            assert got == [
                ("0", 0, None),
                ("00", 0, None),
                ("abc", 42, "Broker id must be an integer, but it is: abc"),
                ("5", 42, "Unexpected broker id, expected 0 or empty string, but received 5"),
                ("0_0", 42, "Broker id must be an integer, but it is: 0_0"),
                # Past Integer.MAX_VALUE parseInt throws, as for a word.
                ("2147483648", 42, "Broker id must be an integer, but it is: 2147483648"),
                # Arabic-Indic zero: parseInt takes any Unicode digit (Character.digit).
                ("\u0660", 0, None),
            ]
            assert [c.value for c in answer.results[1].configs] == ["0"]


@pytest.mark.asyncio
async def test_more_than_ten_thousand_new_partitions_in_one_request_are_refused() -> None:
    # Kafka's controller fails the whole request (KAFKA-17870 for CreateTopics, KAFKA-14996's
    # bound on one operation's records for CreatePartitions) rather than hold everyone.
    grow = CreatePartitionsRequest.CreatePartitionsTopic
    with running(topics=[("small", 1), ("other", 1)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:

            async def create(*counts: int, validate_only: bool = False) -> list[Any]:
                made = await client.request(
                    create_topics(
                        *(new_topic(f"big{i}", n) for i, n in enumerate(counts)),
                        validate_only=validate_only,
                    ),
                    7,
                )
                return [(t.name, t.error_code, t.error_message) for t in made.topics]

            too_many = "Excessively large number of partitions per request."
            policy = ErrorCode.POLICY_VIOLATION
            assert await create(6000, 5000) == [
                ("big0", policy, too_many),
                ("big1", policy, too_many),
            ]
            assert await create(100_000, validate_only=True) == [("big0", policy, too_many)]
            # At the bound, allowed (validated only: no need to make them).
            assert await create(5000, 5000, validate_only=True) == [
                ("big0", ErrorCode.NONE, None),
                ("big1", ErrorCode.NONE, None),
            ]

            grown = await client.request(
                CreatePartitionsRequest(
                    version=3,
                    topics=[
                        grow(name="small", count=9_000, assignments=None),
                        grow(name="other", count=2_000, assignments=None),
                    ],
                    timeout_ms=5000,
                    validate_only=False,
                ),
                3,
            )
            assert [(r.name, r.error_code, r.error_message) for r in grown.results] == [
                (name, policy, "Unable to perform excessively large batch operation.")
                for name in ("small", "other")
            ]
        broker = server.server.broker
        assert server.call(
            lambda: (
                [t.partitions for t in (broker.topics.get("small"), broker.topics.get("other"))],
                {t.name for t in broker.topics.user_topics()},
            )
        ) == ([1, 1], {"small", "other"})


@pytest.mark.asyncio
async def test_new_partitions_replica_lists_are_checked_as_kafkas_controller_checks_them() -> None:
    grow = CreatePartitionsRequest.CreatePartitionsTopic
    assignment = grow.CreatePartitionsAssignment
    cases = {
        "elsewhere": ([[1]], "includes broker 1, but no such broker is registered."),
        "empty": ([[]], "includes an empty replica list."),
        "twice": ([[0, 0]], "includes the broker 0 more than once."),
        "ok": ([[0]], None),
    }
    with running(topics=[(name, 1) for name in cases]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            grown = await client.request(
                CreatePartitionsRequest(
                    version=3,
                    topics=[
                        grow(
                            name=name,
                            count=2,
                            assignments=[assignment(broker_ids=ids) for ids in lists],
                        )
                        for name, (lists, _) in cases.items()
                    ],
                    timeout_ms=5000,
                    validate_only=False,
                ),
                3,
            )
        for result in grown.results:
            why = cases[result.name][1]
            expected = ErrorCode.NONE if why is None else ErrorCode.INVALID_REPLICA_ASSIGNMENT
            assert result.error_code == expected, result
            if why is not None:
                assert result.error_message == f"The manual partition assignment {why}"
        broker = server.server.broker
        assert server.call(lambda: {n: broker.topics.get(n).partitions for n in cases}) == {
            "elsewhere": 1, "empty": 1, "twice": 1, "ok": 2
        }  # fmt: skip


@pytest.mark.asyncio
async def test_unknown_topics_are_refused_in_kafkas_words() -> None:
    # DeleteTopics: ReplicationControlManager's findTopicIds / findTopicNames answer
    # ApiError(error), the error's own message; CreatePartitions throws
    # UnknownTopicOrPartitionException() and ApiError.fromThrowable keeps no message.
    import uuid

    with running() as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            state = DeleteTopicsRequest.DeleteTopicState
            deleted = await client.request(
                DeleteTopicsRequest(
                    version=6,
                    topics=[
                        state(name="nosuch", topic_id=None),
                        state(name=None, topic_id=uuid.uuid4()),
                    ],
                    timeout_ms=1000,
                ),
                6,
            )
            assert [(r.name, r.error_code, r.error_message) for r in deleted.responses] == [
                (
                    "nosuch",
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition.",
                ),
                (None, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
            ]
            grow = CreatePartitionsRequest.CreatePartitionsTopic
            grown = await client.request(
                CreatePartitionsRequest(
                    version=3,
                    topics=[grow(name="nosuch", count=3, assignments=None)],
                    timeout_ms=1000,
                    validate_only=False,
                ),
                3,
            )
            assert [(r.name, r.error_code, r.error_message) for r in grown.results] == [
                ("nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            ]
            # The config APIs: ConfigHelper gives an unknown topic no message and an illegal
            # name Topic.validate's words; an alter says QuorumController's.
            described = await client.request(
                describe_configs(TOPIC_RESOURCE, ("nosuch", "bad!")), 4
            )
            assert [(r.error_code, r.error_message) for r in described.results] == [
                (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
                (
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    "Topic name is invalid: 'bad!' contains one or more characters other than "
                    "ASCII alphanumerics, '.', '_' and '-'",
                ),
            ]
            gone = "The topic 'nosuch' does not exist."
            for request in (
                incremental_alter(TOPIC_RESOURCE, ("nosuch", [("retention.ms", SET, "1")])),
                legacy_alter(TOPIC_RESOURCE, "nosuch", {"retention.ms": "1"}),
            ):
                altered = await client.request(request, request.version)
                assert [(r.error_code, r.error_message) for r in altered.responses] == [
                    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, gone)
                ]


@pytest.mark.asyncio
async def test_broker_configs_carry_kafkas_types() -> None:
    # Each as its ConfigDef defines it; PASSWORD ones (certificates included) never sent back.
    expected = {
        "num.partitions": (3, "1"),
        "connections.max.idle.ms": (5, "600000"),
        "log.cleanup.policy": (7, "delete"),
        "log.cleaner.min.cleanable.ratio": (6, "0.5"),
        "auto.create.topics.enable": (1, "true"),
        "compression.type": (2, "producer"),
        "ssl.keystore.certificate.chain": (9, None),
        "ssl.truststore.certificates": (9, None),
        # Null by default (the hours configs hold Kafka's default), LONG.
        "log.retention.ms": (5, None),
        "log.retention.minutes": (3, None),
        "log.retention.hours": (3, "168"),
        "log.roll.ms": (5, None),
        "log.roll.hours": (3, "168"),
        "offsets.topic.replication.factor": (4, "1"),  # SHORT
        "transaction.state.log.min.isr": (3, "1"),
        "min.insync.replicas": (3, "1"),
        "group.coordinator.rebalance.protocols": (7, "classic,consumer"),
    }
    with running() as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            answer = await client.request(describe_configs(4, ["0"]), 4)
    (result,) = answer.results
    got = {c.name: (c.config_type, c.value) for c in result.configs if c.name in expected}
    assert got == expected
    sensitive = {c.name for c in result.configs if c.is_sensitive}
    assert {"ssl.keystore.certificate.chain", "ssl.truststore.certificates"} <= sensitive


@pytest.mark.asyncio
async def test_broker_synonyms_are_listed_as_kafkas_config_helper_lists_them() -> None:
    # Each config's value set at start, then its default, and the retention and roll times'
    # synonyms (ms, minutes, hours) from the config's own on: log.retention.ms, unset and with
    # no default, lists nothing even though minutes are set.
    static, default = 4, 5
    settings = {"log.retention.minutes": "30", "log.roll.hours": "2", "num.partitions": "3"}
    with running(settings, topics=[("t", 1)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            broker = await client.request(describe_configs(4, ["0"], synonyms=True), 4)
            topic = await client.request(
                describe_configs(2, ["t"], ["retention.ms", "segment.ms"], synonyms=True), 4
            )
    (result,) = broker.results
    got = {
        c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
        for c in result.configs
    }
    assert got["log.retention.ms"] == (None, default, [])
    assert got["log.retention.minutes"] == (
        "30",
        static,
        [("log.retention.minutes", "30", static), ("log.retention.hours", "168", default)],
    )
    assert got["log.retention.hours"] == ("168", default, [("log.retention.hours", "168", default)])
    assert got["log.roll.ms"] == (None, default, [])
    assert got["log.roll.hours"] == (
        "2",
        static,
        [("log.roll.hours", "2", static), ("log.roll.hours", "168", default)],
    )
    assert got["num.partitions"] == (
        "3",
        static,
        [("num.partitions", "3", static), ("num.partitions", "1", default)],
    )
    # The topics take the times in ms; with log.retention.ms and log.roll.ms unset, Kafka
    # lists no synonym and calls the source the default.
    (described,) = topic.results
    assert {(c.name, c.value, c.config_source, len(c.synonyms)) for c in described.configs} == {
        ("retention.ms", "1800000", default, 0),
        ("segment.ms", "7200000", default, 0),
    }
