"""DescribeCluster (key 60), as Kafka 4's KafkaApis.handleDescribeCluster answers it on a
broker listener of a single-node cluster: a stock admin client (kafka-python's
describe_cluster) over TCP; every version with the raw client, its facts the same as
Metadata's; the endpoint types a broker refuses (KIP-919); no ACL needed, the cluster's
authorized operations computed only with Describe on the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from authzkit import authorized_client
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import MetadataRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.app import Server
from minicoord.server.security.acls import Operation
from minicoord.testing.embedded import running

BROKERS, CONTROLLERS = 1, 2
# Kafka's AclEntry.supportedOperations(CLUSTER).
CLUSTER_OPERATIONS = {
    Operation.CREATE,
    Operation.CLUSTER_ACTION,
    Operation.DESCRIBE_CONFIGS,
    Operation.ALTER_CONFIGS,
    Operation.IDEMPOTENT_WRITE,
    Operation.ALTER,
    Operation.DESCRIBE,
}


async def describe(
    client: ProtocolClient,
    version: int,
    operations: bool = False,
    endpoint_type: int = BROKERS,
    fenced: bool = False,
) -> Any:
    fields: dict[str, Any] = {"include_cluster_authorized_operations": operations}
    if version >= 1:
        fields["endpoint_type"] = endpoint_type
    if version >= 2:
        fields["include_fenced_brokers"] = fenced
    request = DescribeClusterRequest(version=version, **fields)
    return await asyncio.wait_for(client.request(request, version), 5)


def brokers(answer: Any) -> list[tuple[int, str, int, str | None]]:
    return [(b.broker_id, b.host, b.port, b.rack) for b in answer.brokers]


async def test_a_stock_admin_client_describes_the_node_as_broker_and_controller(
    tmp_path: Path,
) -> None:
    with running(configs={"broker.id": 3}, data_dir=tmp_path) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        admin = KafkaAdminClient(bootstrap_servers=s.bootstrap, client_id="describe-cluster")
        try:
            described = await asyncio.to_thread(admin.describe_cluster)
        finally:
            admin.close()
        cluster_id = s.server.broker.cluster_id
    # is_fenced and the operations come only from DescribeCluster: kafka-python falls back to
    # Metadata, which has neither, when the broker does not serve it.
    assert described == {
        "cluster_id": cluster_id,
        "controller_id": 3,
        "brokers": [
            {"broker_id": 3, "host": host, "port": int(port), "rack": None, "is_fenced": False}
        ],
        "authorized_operations": [
            "CREATE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
        ],
    }
    # The cluster id is the data directory's, kept across restarts (meta.properties).
    with running(configs={"broker.id": 3}, data_dir=tmp_path) as s:
        admin = KafkaAdminClient(bootstrap_servers=s.bootstrap, client_id="describe-cluster")
        try:
            again = await asyncio.to_thread(admin.describe_cluster)
        finally:
            admin.close()
    assert again["cluster_id"] == cluster_id


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_every_version_answers_what_metadata_answers(
    raw_client: ProtocolClient, inproc_server: Server, version: int
) -> None:
    metadata = await raw_client.request(MetadataRequest(version=12, topics=[]), 12)
    answer = await describe(raw_client, version)
    assert answer.error_code == 0 and answer.error_message is None
    assert answer.cluster_id == metadata.cluster_id == inproc_server.broker.cluster_id
    assert answer.controller_id == metadata.controller_id == 0
    assert brokers(answer) == [(b.node_id, b.host, b.port, b.rack) for b in metadata.brokers]
    assert brokers(answer) == [(0, "127.0.0.1", inproc_server.port, None)]
    # Not asked for: Kafka's "not computed", INT32_MIN on the wire.
    assert answer.authorized_operations is None
    if version >= 1:
        assert answer.endpoint_type == BROKERS
    if version >= 2:
        assert [b.is_fenced for b in answer.brokers] == [False]
        # Fenced brokers included or not: this node is never fenced, so the same answer.
        with_fenced = await describe(raw_client, version, fenced=True)
        assert brokers(with_fenced) == brokers(answer)
    asked = await describe(raw_client, version, operations=True)
    assert asked.authorized_operations == CLUSTER_OPERATIONS


async def test_the_advertised_listener_is_described() -> None:
    configs = {"advertised.listeners": "PLAINTEXT://kafka.example:19092", "broker.id": 7}
    with running(configs=configs) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            answer = await describe(client, 2)
    assert brokers(answer) == [(7, "kafka.example", 19092, None)]
    assert answer.controller_id == 7


@pytest.mark.parametrize("version", [1, 2])
async def test_a_broker_refuses_to_describe_controllers_or_unknown_endpoints(
    raw_client: ProtocolClient, version: int
) -> None:
    # AuthHelper.computeDescribeClusterResponse: the error and its message, nothing else.
    refusals = {
        CONTROLLERS: (
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            "of type CONTROLLER",
        ),
        0: (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
        3: (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 3"),
        -1: (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type -1"),
    }
    for endpoint_type, (error, message) in refusals.items():
        answer = await describe(raw_client, version, operations=True, endpoint_type=endpoint_type)
        assert (answer.error_code, answer.error_message) == (error, message)
        assert (answer.cluster_id, answer.controller_id, answer.brokers) == ("", -1, [])
        assert answer.authorized_operations is None


@pytest.fixture
async def acl_client(request: pytest.FixtureRequest) -> AsyncIterator[ProtocolClient]:
    async with authorized_client(request.param) as client:
        yield client


@pytest.mark.parametrize(
    ("acl_client", "operations"),
    [
        ((), set()),
        (("allow User:ANONYMOUS Describe cluster",), {Operation.DESCRIBE}),
        # Alter implies Describe, so the operations are computed and both are in them.
        (("allow User:ANONYMOUS Alter cluster",), {Operation.ALTER, Operation.DESCRIBE}),
        # Without Describe the operations are 0, whatever else is allowed.
        (
            ("allow User:ANONYMOUS Create cluster", "deny User:ANONYMOUS Describe cluster"),
            set(),
        ),
    ],
    ids=["no-acl", "describe", "alter", "create-not-describe"],
    indirect=["acl_client"],
)
async def test_no_acl_is_needed_and_operations_need_describe_on_the_cluster(
    acl_client: ProtocolClient, operations: set[int]
) -> None:
    answer = await describe(acl_client, 2, operations=True)
    assert answer.error_code == 0, answer
    assert [(b.broker_id, b.is_fenced) for b in answer.brokers] == [(0, False)]
    assert answer.authorized_operations == operations
    unasked = await describe(acl_client, 2)
    assert unasked.error_code == 0 and unasked.authorized_operations is None
