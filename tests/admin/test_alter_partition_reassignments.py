"""AlterPartitionReassignments (key 45, v0-1), as Kafka 4's controller answers it for a
cluster of one node, the only broker registered and every partition's only replica: a target
of [this node] is accepted with no change, any other INVALID_REPLICA_ASSIGNMENT with Kafka's
words, cancelling NO_REASSIGNMENT_IN_PROGRESS, unknown topics and partitions
UNKNOWN_TOPIC_OR_PARTITION; Alter on the cluster. A stock client (kafka-python's
alter_partition_reassignments) over TCP and every version with the raw client."""

from __future__ import annotations

from typing import Any

import pytest
from controllerkit import TOPIC, acl_client, admin, ask, refused
from kafka import TopicPartition
from kafka.errors import (
    ClusterAuthorizationFailedError,
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
INVALID = ErrorCode.INVALID_REPLICA_ASSIGNMENT
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
Partition = Topic.ReassignablePartition
VERSIONS = [0, 1]

Targets = dict[str, dict[int, list[int] | None]]


def reassign(
    version: int, targets: Targets, allow_rf_change: bool = True
) -> AlterPartitionReassignmentsRequest:
    topics = [
        Topic(
            name=name,
            partitions=[Partition(partition_index=i, replicas=r) for i, r in parts.items()],
        )
        for name, parts in targets.items()
    ]
    return AlterPartitionReassignmentsRequest(
        version=version,
        timeout_ms=1000,
        allow_replication_factor_change=allow_rf_change,
        topics=topics,
    )


def outcomes(answer: Any) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    return [
        (t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
        for t in answer.responses
    ]


def unregistered(broker: int) -> str:
    return (
        f"The manual partition assignment includes broker {broker}, but no such broker is "
        "registered."
    )


@pytest.mark.parametrize("version", VERSIONS)
async def test_each_partition_is_answered_as_kafka_checks_it(
    raw_client: ProtocolClient, version: int
) -> None:
    targets: Targets = {
        "topic6": {
            0: [0],  # the assignment it has: accepted, nothing to do
            1: None,  # cancel: nothing in progress
            2: [1],
            3: [0, 2],
            4: [7, 0, 3],  # the lowest unregistered id is named
            5: [],
        },
        "nope": {0: [0]},
    }
    answer = await ask(raw_client, reassign(version, targets))
    assert (answer.error_code, answer.error_message) == (0, None)
    assert outcomes(answer) == [
        (
            "topic6",
            [
                (0, 0, None),
                # Kafka's exception carries the error's own message, which ApiError drops.
                (1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None),
                (2, INVALID, unregistered(1)),
                (3, INVALID, unregistered(2)),
                (4, INVALID, unregistered(3)),
                (5, INVALID, "The manual partition assignment includes an empty replica list."),
            ],
        ),
        ("nope", [(0, UNKNOWN, "Unable to find a topic named nope.")]),
    ]
    answer = await ask(raw_client, reassign(version, {"topic6": {6: [0], -1: None, 1: [0, 0]}}))
    assert outcomes(answer) == [
        (
            "topic6",
            [
                (6, UNKNOWN, "Unable to find partition topic6:6."),
                (-1, UNKNOWN, "Unable to find partition topic6:-1."),
                (
                    1,
                    INVALID,
                    "The manual partition assignment includes the broker 0 more than once.",
                ),
            ],
        )
    ]


@pytest.mark.parametrize("allow_rf_change", [True, False])
async def test_v1_echoes_whether_the_replication_factor_may_change(
    raw_client: ProtocolClient, allow_rf_change: bool
) -> None:
    # One replica, [this node], is the only valid target: the factor can never change.
    answer = await ask(raw_client, reassign(1, {"topic6": {0: [0]}}, allow_rf_change))
    assert answer.allow_replication_factor_change is allow_rf_change
    assert outcomes(answer) == [("topic6", [(0, 0, None)])]


@pytest.mark.parametrize("version", VERSIONS)
async def test_an_empty_request_gets_the_controllers_default_answer(
    raw_client: ProtocolClient, version: int
) -> None:
    # QuorumController answers a new response before looking: its message is "", not null,
    # and its flag the default.
    answer = await ask(raw_client, reassign(version, {}, allow_rf_change=version == 0))
    assert (answer.error_code, answer.error_message, outcomes(answer)) == (0, "", [])
    if version >= 1:
        assert answer.allow_replication_factor_change is True


async def test_the_assignment_is_unchanged(raw_client: ProtocolClient) -> None:
    # Accepted, and nothing started: no reassignment is listed afterwards.
    await ask(raw_client, reassign(1, {"topic6": {0: [0], 1: [1]}}))
    listed = await ask(
        raw_client, ListPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=None)
    )
    assert listed.topics == []


def test_kafka_python_reassigns_to_this_node_and_names_each_refusal() -> None:
    with running(configs={"broker.id": 3}, topics=[(TOPIC, 3)]) as s:
        client = admin(s.bootstrap)
        try:
            answer = client.alter_partition_reassignments(
                {
                    TopicPartition(TOPIC, 0): [3],
                    TopicPartition(TOPIC, 1): [0],
                    TopicPartition(TOPIC, 2): None,
                    TopicPartition("nope", 0): [3],
                }
            )
            assert answer == {
                TopicPartition(TOPIC, 0): None,
                TopicPartition(TOPIC, 1): InvalidReplicationAssignmentError,
                TopicPartition(TOPIC, 2): NoReassignmentInProgressError,
                TopicPartition("nope", 0): UnknownTopicOrPartitionError,
            }
            assert client.list_partition_reassignments() == {}
        finally:
            client.close()


@pytest.mark.parametrize(
    "acls",
    [
        (),
        ("allow User:ANONYMOUS Describe cluster", "allow User:ANONYMOUS Alter topic:*"),
        ("allow User:ANONYMOUS All cluster", "deny User:ANONYMOUS Alter cluster"),
    ],
    ids=["no-acl", "describe-cluster-alter-topics", "alter-denied"],
)
async def test_without_alter_on_the_cluster_every_partition_is_refused(
    acls: tuple[str, ...],
) -> None:
    async with acl_client(*acls) as client:
        denied = (DENIED, refused("AlterPartitionReassignments"))
        for version in VERSIONS:
            request = reassign(version, {TOPIC: {0: [0], 1: None}, "nope": {0: [5]}}, False)
            answer = await ask(client, request)
            assert (answer.error_code, answer.error_message) == denied
            assert outcomes(answer) == [
                (TOPIC, [(0, *denied), (1, *denied)]),
                ("nope", [(0, *denied)]),
            ]
            if version >= 1:
                # getErrorResponse leaves the flag at its default.
                assert answer.allow_replication_factor_change is True
            answer = await ask(client, reassign(version, {}))
            assert (answer.error_code, outcomes(answer)) == (DENIED, [])


async def test_alter_on_the_cluster_is_enough() -> None:
    async with acl_client("allow User:ANONYMOUS Alter cluster") as client:
        answer = await ask(client, reassign(1, {TOPIC: {2: [0]}}))
        assert (answer.error_code, outcomes(answer)) == (0, [(TOPIC, [(2, 0, None)])])


def test_a_stock_admin_client_is_refused_without_alter() -> None:
    with running(topics=[(TOPIC, 1)], acls=["allow User:ANONYMOUS Describe cluster"]) as s:
        client = admin(s.bootstrap)
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                client.alter_partition_reassignments({TopicPartition(TOPIC, 0): [0]})
        finally:
            client.close()
