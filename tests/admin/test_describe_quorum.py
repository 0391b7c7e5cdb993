"""DescribeQuorum (key 55, v0-2), as Kafka 4 answers it for a one-node cluster: one voter,
this node, leading the cluster metadata log at epoch 1, its log end offset that of the
metadata log minicoord keeps; v1's timestamps, v2's directory id and the voter's endpoint;
UNKNOWN_TOPIC_OR_PARTITION for anything but `__cluster_metadata`-0; Describe on the cluster.
A stock client (kafka-python's describe_metadata_quorum) over TCP, with a second listener and
a restart, and every version with the raw client."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from controllerkit import TOPIC, acl_client, admin, ask
from kafka.errors import ClusterAuthorizationFailedError
from kafka.protocol.admin import CreateTopicsRequest, DescribeQuorumRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.app import Server
from minicoord.testing.embedded import running

METADATA = "__cluster_metadata"
UNKNOWN = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
Data = DescribeQuorumRequest.TopicData
VERSIONS = [0, 1, 2]


def describe(version: int, asked: list[tuple[str, list[int]]] | None = None) -> Any:
    asked = [(METADATA, [0])] if asked is None else asked
    topics = [
        Data(topic_name=name, partitions=[Data.PartitionData(partition_index=p) for p in parts])
        for name, parts in asked
    ]
    return DescribeQuorumRequest(version=version, topics=topics)


def create(name: str) -> CreateTopicsRequest:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=2, replication_factor=1, assignments=[], configs=[]
    )
    return CreateTopicsRequest(version=7, topics=[topic], timeout_ms=1000, validate_only=False)


@pytest.mark.parametrize("version", VERSIONS)
async def test_one_voter_leads_the_metadata_log(
    inproc_server: Server, raw_client: ProtocolClient, version: int
) -> None:
    before = time.time_ns() // 1_000_000
    answer = await ask(raw_client, describe(version))
    after = time.time_ns() // 1_000_000
    (topic,) = answer.topics
    (partition,) = topic.partitions
    assert (answer.error_code, topic.topic_name, partition.partition_index) == (0, METADATA, 0)
    assert (partition.error_code, partition.leader_id, partition.leader_epoch) == (0, 0, 1)
    (voter,) = partition.current_voters
    assert partition.observers == []
    # topic6's TopicRecord and six PartitionRecords, all written.
    assert (voter.replica_id, voter.log_end_offset, partition.high_watermark) == (0, 7, 7)
    if version >= 1:
        assert before <= voter.last_fetch_timestamp == voter.last_caught_up_timestamp <= after
    if version >= 2:
        assert (answer.error_message, partition.error_message) == ("", "")
        assert voter.replica_directory_id in (None, uuid.UUID(int=0))
        (node,) = answer.nodes
        assert node.node_id == 0
        assert [(x.name, x.host, x.port) for x in node.listeners] == [
            ("PLAINTEXT", "127.0.0.1", inproc_server.port)
        ]
    # Each metadata record moves the log end: a topic of two partitions is three.
    created = await ask(raw_client, create(f"more-{version}"))
    assert [t.error_code for t in created.topics] == [0]
    answer = await ask(raw_client, describe(version))
    (partition,) = answer.topics[0].partitions
    assert (partition.current_voters[0].log_end_offset, partition.high_watermark) == (10, 10)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "asked",
    [
        [(METADATA, [1])],
        [("topic6", [0])],
        [(METADATA, [0, 0])],
        [(METADATA, [0]), ("topic6", [0, 1])],
        [(METADATA, [])],
    ],
    ids=["partition-1", "another-topic", "twice", "two-topics", "no-partition"],
)
async def test_anything_but_the_metadata_partition_is_unknown(
    raw_client: ProtocolClient, version: int, asked: list[tuple[str, list[int]]]
) -> None:
    # Kafka's getPartitionLevelErrorResponse: each partition asked, the rest left at defaults.
    answer = await ask(raw_client, describe(version, asked))
    assert answer.error_code == 0
    got = [
        (
            t.topic_name,
            [
                (p.partition_index, p.error_code, p.leader_id, p.high_watermark, p.current_voters)
                for p in t.partitions
            ],
        )
        for t in answer.topics
    ]
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert got == [(name, [(p, unknown, 0, 0, []) for p in parts]) for name, parts in asked]
    if version >= 2:
        messages = {p.error_message for t in answer.topics for p in t.partitions}
        assert messages <= {UNKNOWN[1]} and answer.nodes == []
    answer = await ask(raw_client, describe(version, []))
    assert (answer.error_code, answer.topics) == (0, [])


def test_kafka_python_describes_the_quorum_from_each_listener(tmp_path: Path) -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"
    configs = {
        "broker.id": 4,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    }
    with running(configs=configs, listeners=listeners, topics=[(TOPIC, 2)], data_dir=tmp_path) as s:
        for name in ("PLAINTEXT", "INTERNAL"):
            address = s.address_of(name)
            client = admin(address)
            try:
                quorum = client.describe_metadata_quorum()
            finally:
                client.close()
            host, port = address.rsplit(":", 1)
            assert quorum["nodes"] == [
                {"node_id": 4, "listeners": [{"name": name, "host": host, "port": int(port)}]}
            ]
            (topic,) = quorum["topics"]
            (partition,) = topic["partitions"]
            assert (topic["topic_name"], partition["leader_id"], partition["error"]) == (
                METADATA,
                4,
                None,
            )
            assert partition["high_watermark"] == 3  # a TopicRecord, two PartitionRecords
            assert [v["replica_id"] for v in partition["current_voters"]] == [4]
    # The metadata log is kept: after a restart its end is where it was.
    with running(configs={"broker.id": 4}, data_dir=tmp_path) as s:
        client = admin(s.bootstrap)
        try:
            quorum = client.describe_metadata_quorum()
        finally:
            client.close()
        (partition,) = quorum["topics"][0]["partitions"]
        assert partition["current_voters"][0]["log_end_offset"] == 3


@pytest.mark.parametrize(
    "acls",
    [
        (),
        ("allow User:ANONYMOUS DescribeConfigs cluster", "allow User:ANONYMOUS Describe topic:*"),
        ("allow User:ANONYMOUS All cluster", "deny User:ANONYMOUS Describe cluster"),
    ],
    ids=["no-acl", "describe-configs-and-topics", "describe-denied"],
)
async def test_without_describe_on_the_cluster_nothing_is_described(
    acls: tuple[str, ...],
) -> None:
    async with acl_client(*acls) as client:
        for version in VERSIONS:
            for asked in (None, [("nope", [3])]):
                answer = await ask(client, describe(version, asked))
                assert (answer.error_code, answer.topics) == (
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    [],
                )
                if version >= 2:
                    # The error's own message: getErrorResponse does not use the exception's.
                    assert answer.error_message == "Cluster authorization failed."
                    assert answer.nodes == []


@pytest.mark.parametrize(
    "acls",
    [("allow User:ANONYMOUS Describe cluster",), ("allow User:ANONYMOUS Alter cluster",)],
    ids=["describe", "alter-implies-it"],
)
async def test_describe_on_the_cluster_is_enough(acls: tuple[str, ...]) -> None:
    async with acl_client(*acls) as client:
        answer = await ask(client, describe(2))
        (partition,) = answer.topics[0].partitions
        assert (answer.error_code, partition.error_code, partition.leader_id) == (0, 0, 0)


def test_a_stock_admin_client_is_refused_without_describe() -> None:
    with running(topics=[(TOPIC, 1)], acls=["allow User:ANONYMOUS Describe topic:*"]) as s:
        client = admin(s.bootstrap)
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                client.describe_metadata_quorum()
        finally:
            client.close()
