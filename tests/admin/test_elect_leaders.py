"""ElectLeaders (key 43), as Kafka 4's controller answers it for a cluster of one node that
leads every partition as its preferred replica: ELECTION_NOT_NEEDED for each partition named
(preferred and unclean), UNKNOWN_TOPIC_OR_PARTITION with Kafka's words, null partitions
listing each topic with none, INVALID_REQUEST for an unknown election type, and Alter on the
cluster. Stock clients (kafka-python's and confluent-kafka's elect_leaders) over TCP, and
every version with the raw client."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from controllerkit import TOPIC, acl_client, admin, ask, refused
from kafka.errors import ClusterAuthorizationFailedError, UnknownTopicOrPartitionError
from kafka.protocol.admin import ElectLeadersRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

NOT_NEEDED = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
VERSIONS = [0, 1, 2]

Results = list[tuple[str, list[tuple[int, int, str | None]]]]


def elect(
    version: int, asked: dict[str, list[int]] | None, election_type: int = 0
) -> ElectLeadersRequest:
    partitions = (
        None
        if asked is None
        else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in asked.items()]
    )
    return ElectLeadersRequest(
        version=version, election_type=election_type, topic_partitions=partitions, timeout_ms=1000
    )


def results(answer: Any) -> Results:
    return [
        (r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
        for r in answer.replica_election_results
    ]


def top_error(answer: Any, version: int) -> int | None:
    # v0 has no top-level error code.
    return answer.error_code if version >= 1 else None


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_partition_already_has_its_preferred_leader(
    raw_client: ProtocolClient, version: int
) -> None:
    answer = await ask(raw_client, elect(version, {"topic6": [0, 5, 5], "nope": [0]}))
    assert top_error(answer, version) in (None, 0)
    assert results(answer) == [
        ("topic6", [(0, *NOT_NEEDED), (5, *NOT_NEEDED), (5, *NOT_NEEDED)]),
        ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")]),
    ]
    answer = await ask(raw_client, elect(version, {"topic6": [6, -1]}))
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results(answer) == [
        (
            "topic6",
            [
                (6, unknown, "No such partition as topic6-6"),
                (-1, unknown, "No such partition as topic6--1"),
            ],
        )
    ]


@pytest.mark.parametrize("version", [1, 2])
async def test_an_unclean_election_is_not_needed_either(
    raw_client: ProtocolClient, version: int
) -> None:
    # Kafka skips an unclean election for a partition that has a leader.
    answer = await ask(raw_client, elect(version, {"topic6": [1]}, election_type=1))
    assert (answer.error_code, results(answer)) == (0, [("topic6", [(1, *NOT_NEEDED)])])


@pytest.mark.parametrize("version", VERSIONS)
async def test_null_partitions_lists_every_topic_with_no_partition(
    raw_client: ProtocolClient, version: int
) -> None:
    # Kafka leaves out the partitions that needed no election, which here is all of them.
    answer = await ask(raw_client, elect(version, None))
    assert top_error(answer, version) in (None, 0)
    assert results(answer) == [("topic6", [])]
    found = await raw_client.request(FindCoordinatorRequest(version=1, key="g", key_type=0), 1)
    assert found.error_code == 0, found
    answer = await ask(raw_client, elect(version, None))
    assert results(answer) == [("__consumer_offsets", []), ("topic6", [])]


@pytest.mark.parametrize("version", VERSIONS)
async def test_an_empty_list_elects_nothing(raw_client: ProtocolClient, version: int) -> None:
    answer = await ask(raw_client, elect(version, {}))
    assert (top_error(answer, version) in (None, 0), results(answer)) == (True, [])


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("election_type", [2, -1, 127])
async def test_an_unknown_election_type_is_an_invalid_request(
    raw_client: ProtocolClient, version: int, election_type: int
) -> None:
    invalid = (ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
    answer = await ask(raw_client, elect(version, {"topic6": [0], "nope": [1]}, election_type))
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    assert results(answer) == [("topic6", [(0, *invalid)]), ("nope", [(1, *invalid)])]
    answer = await ask(raw_client, elect(version, None, election_type))
    assert (answer.error_code, results(answer)) == (ErrorCode.INVALID_REQUEST, [])
    # Kafka's controller answers an empty list before it reads the type.
    answer = await ask(raw_client, elect(version, {}, election_type))
    assert (answer.error_code, results(answer)) == (0, [])


def test_kafka_python_elects_nothing_and_names_an_unknown_topic() -> None:
    with running(topics=[(TOPIC, 3), ("audit", 1)]) as s:
        client = admin(s.bootstrap)
        try:
            # None: every partition of every topic, which it sends by name.
            answer = client.elect_leaders(0)
            codes = {
                (r.topic, p.partition_id): p.error_code
                for r in answer.replica_election_results
                for p in r.partition_result
            }
            assert codes == {
                (TOPIC, 0): ErrorCode.ELECTION_NOT_NEEDED,
                (TOPIC, 1): ErrorCode.ELECTION_NOT_NEEDED,
                (TOPIC, 2): ErrorCode.ELECTION_NOT_NEEDED,
                ("audit", 0): ErrorCode.ELECTION_NOT_NEEDED,
            }
            answer = client.elect_leaders(1, {TOPIC: [2]})
            assert answer.replica_election_results[0].partition_result[0].error_code == 84
            with pytest.raises(UnknownTopicOrPartitionError):
                client.elect_leaders(0, {"nope": [0]})
        finally:
            client.close()


def test_confluent_kafka_elects_nothing() -> None:
    with running(topics=[(TOPIC, 2)]) as s:
        client = AdminClient({"bootstrap.servers": s.bootstrap})
        # All partitions (null on the wire): Kafka lists none that needed no election.
        everything = client.elect_leaders(ElectionType.PREFERRED, None).result(timeout=10)
        assert everything == {}
        asked = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1), TopicPartition("nope", 0)]
        answer = client.elect_leaders(ElectionType.UNCLEAN, asked).result(timeout=10)
        codes = {(tp.topic, tp.partition): error.code() for tp, error in answer.items()}
        del client  # before the server stops: librdkafka would log its reconnects
        assert codes == {
            (TOPIC, 0): KafkaError.ELECTION_NOT_NEEDED,
            (TOPIC, 1): KafkaError.ELECTION_NOT_NEEDED,
            ("nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
        }


@pytest.mark.parametrize(
    "acls",
    [
        (),
        ("allow User:ANONYMOUS Describe cluster", "allow User:ANONYMOUS Alter topic:*"),
        ("allow User:ANONYMOUS All cluster", "deny User:ANONYMOUS Alter cluster"),
    ],
    ids=["no-acl", "describe-cluster-alter-topics", "alter-denied"],
)
async def test_without_alter_on_the_cluster_each_partition_named_is_refused(
    acls: tuple[str, ...],
) -> None:
    async with acl_client(*acls) as client:
        denied = (DENIED, refused("ElectLeaders"))
        for version in VERSIONS:
            # Checked first: an unknown topic or election type is refused all the same.
            for election_type in (0, 5) if version else (0,):
                request = elect(version, {TOPIC: [0], "nope": [1]}, election_type)
                answer = await ask(client, request)
                assert top_error(answer, version) in (None, DENIED)
                assert results(answer) == [(TOPIC, [(0, *denied)]), ("nope", [(1, *denied)])]
            # Every partition asked for: nothing listed, the error at the top only (v1+).
            answer = await ask(client, elect(version, None))
            assert (top_error(answer, version), results(answer)) == (
                DENIED if version else None,
                [],
            )


@pytest.mark.parametrize(
    "acls",
    [("allow User:ANONYMOUS Alter cluster",), ("allow User:ANONYMOUS All cluster",)],
    ids=["alter", "all"],
)
async def test_alter_on_the_cluster_is_enough(acls: tuple[str, ...]) -> None:
    async with acl_client(*acls) as client:
        answer = await ask(client, elect(2, {TOPIC: [1]}))
        assert (answer.error_code, results(answer)) == (0, [(TOPIC, [(1, *NOT_NEEDED)])])
        answer = await ask(client, elect(2, None))
        assert (answer.error_code, results(answer)) == (0, [(TOPIC, [])])


def test_a_stock_admin_client_is_refused_without_alter() -> None:
    with running(topics=[(TOPIC, 1)], acls=["allow User:ANONYMOUS Describe cluster"]) as s:
        client = admin(s.bootstrap)
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                client.elect_leaders(0, {TOPIC: [0]})
        finally:
            client.close()
