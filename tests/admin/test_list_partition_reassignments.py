"""ListPartitionReassignments (key 46, v0), as Kafka 4's controller answers it for a cluster
of one node, where nothing ever moves: no reassignment in progress, whatever is asked, and
topics or partitions that do not exist left out silently; Describe on the cluster. A stock
client (kafka-python's list_partition_reassignments) over TCP and the raw client."""

from __future__ import annotations

from typing import Any

import pytest
from controllerkit import TOPIC, acl_client, admin, ask, refused
from kafka import TopicPartition
from kafka.errors import ClusterAuthorizationFailedError
from kafka.protocol.admin import ListPartitionReassignmentsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
Topics = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics


def listing(asked: dict[str, list[int]] | None) -> ListPartitionReassignmentsRequest:
    topics = (
        None if asked is None else [Topics(name=t, partition_indexes=p) for t, p in asked.items()]
    )
    return ListPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=topics)


def listed(answer: Any) -> list[tuple[str, list[tuple[int, list[int], list[int], list[int]]]]]:
    return [
        (
            t.name,
            [
                (p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                for p in t.partitions
            ],
        )
        for t in answer.topics
    ]


@pytest.mark.parametrize(
    "asked",
    [None, {}, {"topic6": [0, 5]}, {"topic6": [6, -1], "nope": [0]}],
    ids=["everything", "nothing", "existing", "unknown"],
)
async def test_no_reassignment_is_ever_in_progress(
    raw_client: ProtocolClient, asked: dict[str, list[int]] | None
) -> None:
    answer = await ask(raw_client, listing(asked))
    assert (answer.error_code, answer.error_message, listed(answer)) == (0, None, [])


def test_kafka_python_lists_none() -> None:
    with running(topics=[(TOPIC, 2)]) as s:
        client = admin(s.bootstrap)
        try:
            assert client.list_partition_reassignments() == {}
            assert client.list_partition_reassignments({TOPIC: [0, 1], "nope": [0]}) == {}
            assert client.list_partition_reassignments([TopicPartition(TOPIC, 1)]) == {}
        finally:
            client.close()


@pytest.mark.parametrize(
    "acls",
    [
        (),
        ("allow User:ANONYMOUS Describe topic:*", "allow User:ANONYMOUS DescribeConfigs cluster"),
        ("allow User:ANONYMOUS All cluster", "deny User:ANONYMOUS Describe cluster"),
    ],
    ids=["no-acl", "describe-topics", "describe-denied"],
)
async def test_without_describe_on_the_cluster_the_partitions_named_come_back_refused(
    acls: tuple[str, ...],
) -> None:
    async with acl_client(*acls) as client:
        # As Kafka's getErrorResponse: each partition named, with no replicas.
        answer = await ask(client, listing({TOPIC: [0, 2], "nope": [7]}))
        assert (answer.error_code, answer.error_message) == (
            DENIED,
            refused("ListPartitionReassignments"),
        )
        assert listed(answer) == [
            (TOPIC, [(0, [], [], []), (2, [], [], [])]),
            ("nope", [(7, [], [], [])]),
        ]
        answer = await ask(client, listing(None))
        assert (answer.error_code, listed(answer)) == (DENIED, [])


@pytest.mark.parametrize(
    "acls",
    [("allow User:ANONYMOUS Describe cluster",), ("allow User:ANONYMOUS Alter cluster",)],
    ids=["describe", "alter-implies-it"],
)
async def test_describe_on_the_cluster_is_enough(acls: tuple[str, ...]) -> None:
    async with acl_client(*acls) as client:
        answer = await ask(client, listing({TOPIC: [0]}))
        assert (answer.error_code, answer.error_message, listed(answer)) == (0, None, [])


def test_a_stock_admin_client_is_refused_without_describe() -> None:
    with running(topics=[(TOPIC, 1)], acls=["allow User:ANONYMOUS Describe topic:*"]) as s:
        client = admin(s.bootstrap)
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                client.list_partition_reassignments()
        finally:
            client.close()
