"""Client-metrics subscriptions (KIP-714's CLIENT_METRICS config resource, type 16), as Kafka
4.1 keeps them: a stock admin client (kafka-python) sets, describes, lists and deletes one over
TCP; the raw client sees Kafka's checks with its error codes and words (ClientMetricsConfigs
.validate); the legacy AlterConfigs replaces a subscription's set; subscriptions outlive a
restart; the cluster's AlterConfigs/DescribeConfigs is required."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from authzkit import authorized_client
from datakit import incremental_alter, legacy_alter
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest, ListConfigResourcesRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

CLIENT_METRICS = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DEFAULT_CONFIG, CLIENT_METRICS_CONFIG = 5, 7
INT, LIST = 3, 7
INVALID_REQUEST, INVALID_CONFIG = ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_CONFIG
DEFAULTS = {"interval.ms": "300000", "match": "", "metrics": ""}
RANGE = "interval must be between 100 and 3600000 (1 hour)"


async def describe(client: ProtocolClient, name: str, keys: list[str] | None = None) -> Any:
    answer = await client.request(
        DescribeConfigsRequest(
            version=4,
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=keys
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        ),
        4,
    )
    return answer.results[0]


async def values(client: ProtocolClient, name: str) -> dict[str, str]:
    result = await describe(client, name)
    assert result.error_code == 0, result
    return {c.name: c.value for c in result.configs}


async def alter(
    client: ProtocolClient, name: str, *changes: tuple[str, int, str | None]
) -> tuple[int, str]:
    answer = await client.request(incremental_alter(CLIENT_METRICS, (name, changes)), 1)
    r = answer.responses[0]
    return r.error_code, r.error_message or ""


async def listed(client: ProtocolClient, version: int = 1) -> list[str]:
    if version == 0:
        request = ListConfigResourcesRequest(version=0)
    else:
        request = ListConfigResourcesRequest(version=1, resource_types=[CLIENT_METRICS])
    answer = await client.request(request, version)
    assert answer.error_code == 0, answer
    return [r.resource_name for r in answer.config_resources]


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="client-metrics", request_timeout_ms=10_000
    )


def test_a_stock_admin_client_sets_describes_lists_and_deletes_a_subscription() -> None:
    with running() as server:
        client = admin(server.bootstrap)
        try:
            # As kafka-client-metrics.sh --alter --name s --metrics ... --interval ... --match
            results = client.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.CLIENT_METRICS,
                        "producers",
                        configs={
                            "metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
                            "interval.ms": "1000",
                            "match": "client_software_name=apache-kafka-java",
                        },
                    )
                ]
            )
            assert results == {"client_metrics": {"producers": "OK"}}, results
            resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers")
            described = client.describe_configs([resource], config_filter="all")
            configs = described["client_metrics"]["producers"]
            assert {k: v["value"] for k, v in configs.items()} == {
                # Described as parsed: the list's spaces gone.
                "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                "interval.ms": "1000",
                "match": "client_software_name=apache-kafka-java",
            }
            assert client.list_config_resources(["CLIENT_METRICS"]) == {
                "client_metrics": ["producers"]
            }
            # Its last configs deleted, the subscription is gone.
            client.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.CLIENT_METRICS,
                        "producers",
                        configs={k: ("DELETE", None) for k in ("metrics", "interval.ms", "match")},
                    )
                ]
            )
            assert client.list_config_resources(["CLIENT_METRICS"]) == {}
            described = client.describe_configs([resource], config_filter="all")
            configs = described["client_metrics"]["producers"]
            assert {k: v["value"] for k, v in configs.items()} == DEFAULTS
        finally:
            client.close()


async def test_any_name_describes_with_kafkas_defaults_types_and_sources(
    raw_client: ProtocolClient,
) -> None:
    result = await describe(raw_client, "never-made")
    assert result.error_code == 0
    described = [
        (c.name, c.value, c.config_source, c.config_type, c.synonyms) for c in result.configs
    ]
    assert described == [
        ("interval.ms", "300000", DEFAULT_CONFIG, INT, []),
        ("match", "", DEFAULT_CONFIG, LIST, []),
        ("metrics", "", DEFAULT_CONFIG, LIST, []),
    ]
    assert [c.documentation for c in result.configs] == [
        "Metrics push interval in milliseconds",
        "Client match criteria",
        "Telemetry metric name prefix list",
    ]
    assert await alter(raw_client, "s", ("interval.ms", SET, " 2000 ")) == (0, "")
    result = await describe(raw_client, "s", ["interval.ms"])
    [entry] = result.configs
    assert (entry.value, entry.config_source) == ("2000", CLIENT_METRICS_CONFIG)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("interval.ms", "2000", CLIENT_METRICS_CONFIG)
    ]
    result = await describe(raw_client, "")
    assert (result.error_code, result.error_message, result.configs) == (
        INVALID_REQUEST,
        "Client metrics subscription name must not be empty",
        [],
    )


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            ("interval.ms", SET, "99"),
            (INVALID_REQUEST, f"Invalid value 99 for interval.ms, {RANGE}"),
        ),
        (
            ("interval.ms", SET, "3600001"),
            (INVALID_REQUEST, f"Invalid value 3600001 for interval.ms, {RANGE}"),
        ),
        (
            ("interval.ms", SET, "soon"),
            (
                INVALID_CONFIG,
                "Invalid value soon for configuration interval.ms: Not a number of type INT",
            ),
        ),
        (("colour", SET, "red"), (INVALID_REQUEST, "Unknown client metrics configuration: colour")),
        (
            ("match", SET, "client_id=a, host=b"),
            (INVALID_CONFIG, "Illegal client matching pattern: host=b"),
        ),
        (
            ("match", SET, "client_id"),
            (INVALID_CONFIG, "Illegal client matching pattern: client_id"),
        ),
        (
            ("match", SET, "client_id=a=b"),
            (INVALID_CONFIG, "Illegal client matching pattern: client_id=a=b"),
        ),
        (
            ("match", SET, "client_id=("),
            (INVALID_CONFIG, "Illegal client matching pattern: client_id=("),
        ),
        # Kafka's controller splits only topic and broker lists.
        (
            ("metrics", APPEND, "x."),
            (INVALID_CONFIG, "Can't APPEND to key metrics because its type is not LIST."),
        ),
        (
            ("match", SUBTRACT, "client_id=a"),
            (INVALID_CONFIG, "Can't SUBTRACT to key match because its type is not LIST."),
        ),
    ],
)
async def test_a_change_kafka_refuses_is_refused_in_its_words(
    raw_client: ProtocolClient, change: tuple[str, int, str], refusal: tuple[int, str]
) -> None:
    assert await alter(raw_client, "s", ("metrics", SET, "org.apache.kafka.")) == (0, "")
    assert await alter(raw_client, "s", change) == refusal
    # Nothing changed.
    assert await values(raw_client, "s") == {**DEFAULTS, "metrics": "org.apache.kafka."}


async def test_a_subscription_needs_a_name_and_validate_only_changes_nothing(
    raw_client: ProtocolClient,
) -> None:
    assert await alter(raw_client, "", ("metrics", SET, "*")) == (
        INVALID_REQUEST,
        "Subscription name can't be empty",
    )
    request = incremental_alter(CLIENT_METRICS, ("s", [("metrics", SET, "*")]))
    request.validate_only = True
    answer = await raw_client.request(request, 1)
    assert [r.error_code for r in answer.responses] == [0]
    assert await listed(raw_client) == []
    # Deleting what a subscription does not have changes nothing and makes none.
    assert await alter(raw_client, "s", ("metrics", DELETE, None)) == (0, "")
    assert await listed(raw_client) == []


async def test_the_legacy_alter_configs_replaces_a_subscriptions_whole_set(
    raw_client: ProtocolClient,
) -> None:
    assert await alter(raw_client, "s", ("metrics", SET, "a."), ("interval.ms", SET, "500")) == (
        0,
        "",
    )
    replacing = legacy_alter(CLIENT_METRICS, "s", {"match": "client_id=c"})
    answer = await raw_client.request(replacing, 2)
    assert [(r.error_code, r.error_message) for r in answer.responses] == [(0, None)]
    assert await values(raw_client, "s") == {**DEFAULTS, "match": "client_id=c"}
    answer = await raw_client.request(legacy_alter(CLIENT_METRICS, "s", {"size": "1"}), 2)
    assert [(r.error_code, r.error_message) for r in answer.responses] == [
        (INVALID_REQUEST, "Unknown client metrics configuration: size")
    ]


async def test_subscriptions_are_listed_by_v0_and_v1_in_name_order(
    raw_client: ProtocolClient,
) -> None:
    for name in ("zeta", "alpha"):
        assert await alter(raw_client, name, ("metrics", SET, "*")) == (0, "")
    assert await listed(raw_client, 0) == ["alpha", "zeta"]
    assert await listed(raw_client, 1) == ["alpha", "zeta"]


async def test_subscriptions_outlive_a_restart(tmp_path: Path) -> None:
    for round_ in range(2):
        with running(data_dir=tmp_path) as server:
            host, port = server.bootstrap.rsplit(":", 1)
            async with await ProtocolClient.connect(host, int(port)) as client:
                if round_ == 0:
                    changes = [("metrics", SET, "org."), ("interval.ms", SET, "750")]
                    assert await alter(client, "kept", *changes) == (0, "")
                    assert await alter(client, "dropped", ("metrics", SET, "*")) == (0, "")
                    assert await alter(client, "dropped", ("metrics", DELETE, None)) == (0, "")
                else:
                    assert await listed(client) == ["kept"]
                    assert await values(client, "kept") == {
                        **DEFAULTS,
                        "metrics": "org.",
                        "interval.ms": "750",
                    }


async def test_the_cluster_is_authorized() -> None:
    async with authorized_client(["allow User:ANONYMOUS Describe cluster"]) as client:
        result = await asyncio.wait_for(describe(client, "s"), 5)
        assert (result.error_code, result.configs) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        assert await alter(client, "s", ("metrics", SET, "*")) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        )
    async with authorized_client(["allow User:ANONYMOUS AlterConfigs cluster"]) as client:
        assert await alter(client, "s", ("metrics", SET, "*")) == (0, "")
        assert (await values(client, "s"))["metrics"] == "*"
