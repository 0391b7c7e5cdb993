"""ListConfigResources (key 74, KIP-1142, Kafka 4.1): the resources one may describe configs
of, as Kafka's KafkaApis.handleListConfigResources lists them. A stock admin client
(kafka-python's list_config_resources) over TCP; v0 (KIP-714's ListClientMetricsResources,
client metrics only) and v1 (a type filter, every v1 type when empty) with the raw client;
UNSUPPORTED_VERSION for a type the version does not know; DescribeConfigs on the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from authzkit import authorized_client
from datakit import incremental_alter
from kafka import KafkaAdminClient
from kafka.errors import ClusterAuthorizationFailedError
from kafka.protocol.admin import ListConfigResourcesRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SESSION = "consumer.session.timeout.ms"
SET, DELETE = 0, 1
UNSUPPORTED = ErrorCode.UNSUPPORTED_VERSION
DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

Listed = tuple[int, list[tuple[str, int]]]


async def list_resources(client: ProtocolClient, version: int, types: Iterable[int] = ()) -> Listed:
    """(error code, [(name, type)]) of a ListConfigResources at `version`."""
    if version == 0:
        request = ListConfigResourcesRequest(version=0)
    else:
        request = ListConfigResourcesRequest(version=version, resource_types=list(types))
    answer = await asyncio.wait_for(client.request(request, version), 5)
    # v0 carries no type: every resource it lists is a client-metrics one.
    return answer.error_code, [
        (r.resource_name, r.resource_type if version >= 1 else CLIENT_METRICS)
        for r in answer.config_resources
    ]


async def set_group_config(client: ProtocolClient, group: str, value: str | None) -> None:
    change = (SESSION, SET if value is not None else DELETE, value)
    answer = await asyncio.wait_for(
        client.request(incremental_alter(GROUP, (group, [change])), 1), 5
    )
    assert [r.error_code for r in answer.responses] == [0], answer


async def set_subscription(client: ProtocolClient, name: str) -> None:
    change = ("metrics", SET, "org.apache.kafka.")
    answer = await asyncio.wait_for(
        client.request(incremental_alter(CLIENT_METRICS, (name, [change])), 1), 5
    )
    assert [r.error_code for r in answer.responses] == [0], answer


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="list-config-resources", request_timeout_ms=10_000
    )


async def test_a_stock_admin_client_lists_groups_with_configs_the_node_and_topics(
    tmp_path: Path,
) -> None:
    # Groups are listed for their configs alone: neither has ever had a member (KIP-1142).
    configs = {"broker.id": 3}
    with running(configs=configs, topics=[("orders", 2), ("audit", 1)], data_dir=tmp_path) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            await set_group_config(client, "billing", "20000")
            await set_group_config(client, "alerts", "30000")
            client_admin = admin(s.bootstrap)
            try:
                everything = await asyncio.to_thread(client_admin.list_config_resources)
                assert everything == {
                    "group": ["alerts", "billing"],
                    "broker_logger": ["3"],
                    "broker": ["3"],
                    "topic": ["audit", "orders"],
                }
                groups = await asyncio.to_thread(client_admin.list_config_resources, ["GROUP"])
                assert groups == {"group": ["alerts", "billing"]}
                # A group whose last config is deleted has none left to list.
                await set_group_config(client, "alerts", None)
                groups = await asyncio.to_thread(client_admin.list_config_resources, ["GROUP"])
                assert groups == {"group": ["billing"]}
                with pytest.raises(Exception, match="UnsupportedVersion"):
                    await asyncio.to_thread(client_admin.list_config_resources, ["UNKNOWN"])
            finally:
                client_admin.close()
    # The group configs are in the metadata log, so a restart lists them again.
    with running(configs=configs, data_dir=tmp_path) as s:
        client_admin = admin(s.bootstrap)
        try:
            listed = await asyncio.to_thread(client_admin.list_config_resources, ["GROUP", "TOPIC"])
        finally:
            client_admin.close()
        assert listed == {"group": ["billing"], "topic": ["audit", "orders"]}


async def test_v0_lists_client_metrics_only(raw_client: ProtocolClient) -> None:
    await set_group_config(raw_client, "g", "20000")
    assert await list_resources(raw_client, 0) == (0, [])
    await set_subscription(raw_client, "s")
    assert await list_resources(raw_client, 0) == (0, [("s", CLIENT_METRICS)])


async def test_v1_without_types_lists_every_v1_type_in_kafkas_order(
    raw_client: ProtocolClient,
) -> None:
    await set_group_config(raw_client, "g2", "20000")
    await set_group_config(raw_client, "g1", "20000")
    await set_subscription(raw_client, "s")
    assert await list_resources(raw_client, 1) == (
        0,
        [
            ("g1", GROUP),
            ("g2", GROUP),
            ("s", CLIENT_METRICS),
            ("0", BROKER_LOGGER),
            ("0", BROKER),
            ("topic6", TOPIC),
        ],
    )


async def test_v1_lists_the_types_asked_once_each_in_kafkas_order(
    raw_client: ProtocolClient,
) -> None:
    await set_group_config(raw_client, "g", "20000")
    assert await list_resources(raw_client, 1, [TOPIC, BROKER, TOPIC]) == (
        0,
        [("0", BROKER), ("topic6", TOPIC)],
    )
    assert await list_resources(raw_client, 1, [GROUP]) == (0, [("g", GROUP)])
    assert await list_resources(raw_client, 1, [BROKER_LOGGER]) == (0, [("0", BROKER_LOGGER)])
    assert await list_resources(raw_client, 1, [CLIENT_METRICS]) == (0, [])


async def test_the_offsets_topic_is_listed_once_it_exists(raw_client: ProtocolClient) -> None:
    assert await list_resources(raw_client, 1, [TOPIC]) == (0, [("topic6", TOPIC)])
    found = await raw_client.request(FindCoordinatorRequest(version=1, key="g", key_type=0), 1)
    assert found.error_code == 0, found
    assert await list_resources(raw_client, 1, [TOPIC]) == (
        0,
        [("__consumer_offsets", TOPIC), ("topic6", TOPIC)],
    )


@pytest.mark.parametrize(
    "types",
    [[0], [1], [64], [-1], [TOPIC, 1], [GROUP, 127]],
    ids=["unknown-0", "any-1", "64", "negative", "topic-and-1", "group-and-127"],
)
async def test_a_type_v1_does_not_know_fails_the_whole_request(
    raw_client: ProtocolClient, types: list[int]
) -> None:
    assert await list_resources(raw_client, 1, types) == (UNSUPPORTED, [])


@pytest.fixture
async def acl_client(request: pytest.FixtureRequest) -> AsyncIterator[ProtocolClient]:
    async with authorized_client(request.param, [("secret", 1)]) as client:
        yield client


@pytest.mark.parametrize(
    "acl_client",
    [
        (),
        ("allow User:ANONYMOUS Describe cluster", "allow User:ANONYMOUS DescribeConfigs topic:*"),
        ("allow User:ANONYMOUS DescribeConfigs group:*",),
        ("allow User:ANONYMOUS All cluster", "deny User:ANONYMOUS DescribeConfigs cluster"),
    ],
    ids=["no-acl", "describe-cluster-and-topic-configs", "group-configs", "denied"],
    indirect=True,
)
async def test_without_describe_configs_on_the_cluster_nothing_is_listed(
    acl_client: ProtocolClient,
) -> None:
    # Checked before the types: an unknown one is refused for authorization, not version.
    for version, types in ((0, []), (1, []), (1, [TOPIC]), (1, [1])):
        assert await list_resources(acl_client, version, types) == (DENIED, [])


@pytest.mark.parametrize(
    "acl_client",
    [
        ("allow User:ANONYMOUS DescribeConfigs cluster",),
        ("allow User:ANONYMOUS AlterConfigs cluster",),
    ],
    ids=["describe-configs", "alter-configs-implies-it"],
    indirect=True,
)
async def test_describe_configs_on_the_cluster_lists_every_resource(
    acl_client: ProtocolClient,
) -> None:
    # Nothing is checked per resource: the topic is listed though it may not be described.
    assert await list_resources(acl_client, 1) == (
        0,
        [("0", BROKER_LOGGER), ("0", BROKER), ("secret", TOPIC)],
    )
    assert await list_resources(acl_client, 1, [1]) == (UNSUPPORTED, [])
    assert await list_resources(acl_client, 0) == (0, [])


def test_a_stock_admin_client_is_refused_without_describe_configs() -> None:
    with running(topics=[("secret", 1)], acls=["allow User:ANONYMOUS Describe cluster"]) as s:
        client_admin: Any = admin(s.bootstrap)
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                client_admin.list_config_resources()
        finally:
            client_admin.close()
