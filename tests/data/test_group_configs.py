"""Group configs (Kafka 4's GROUP config resource, type 32): a consumer group's own session
timeout and heartbeat interval, described and altered over the wire as Kafka answers them
(GroupConfig's names, checks and words), persisted across a restart, and in force for the
group's members."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from datakit import incremental_alter, legacy_alter
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.consumer_group_apis import ConsumerGroupHeartbeatRequest
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

GROUP = 32
SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
SET, DELETE = 0, 1
DEFAULT, GROUP_CONFIG = 5, 8
CONFIGS = {"group.consumer.session.timeout.ms": 10_000, "group.consumer.heartbeat.interval.ms": 500}


async def describe(client: Any, group: str) -> tuple[int, dict[str, tuple[str, int, int]]]:
    described = await client.request(
        DescribeConfigsRequest(
            version=4,
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=GROUP, resource_name=group, configuration_keys=None
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        ),
        4,
    )
    result = described.results[0]
    return result.error_code, {
        c.name: (c.value, c.config_source, c.config_type)
        for c in result.configs
        if c.name.startswith("consumer.")
    }


async def describe_share(client: Any, group: str) -> dict[str, tuple[str, int]]:
    """The share-group configs of a group: value and source."""
    described = await client.request(
        DescribeConfigsRequest(
            version=4,
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=GROUP, resource_name=group, configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
    )
    return {
        c.name: (c.value, c.config_source)
        for c in described.results[0].configs
        if c.name.startswith("share.")
    }


async def alter(client: Any, group: str, *changes: tuple[str, int, str | None]) -> tuple[int, str]:
    answer = await client.request(incremental_alter(GROUP, (group, changes)), 1)
    r = answer.responses[0]
    return r.error_code, r.error_message or ""


async def joined_interval(client: Any, group: str) -> int:
    answer = await client.request(
        ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id="member-1",
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"],
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[],
        ),
        1,
    )
    assert answer.error_code == 0, answer
    return int(answer.heartbeat_interval_ms)


@pytest.mark.asyncio
async def test_a_groups_configs_are_described_altered_checked_and_kept(tmp_path: Path) -> None:
    with running(configs=CONFIGS, topics=[("t", 2)], data_dir=tmp_path) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            # Any group id, existing or not: the broker's values, as defaults.
            assert await describe(client, "g") == (
                0, {SESSION: ("10000", DEFAULT, 3), INTERVAL: ("500", DEFAULT, 3)}
            )  # fmt: skip
            at_least, at_most = "must be greater than or equal to", "must be less than or equal to"
            refusals = [
                ((("nope", SET, "1"),), "Unknown group config name: nope"),
                (
                    ((SESSION, SET, "x"),),
                    f"Invalid value x for configuration {SESSION}: Not a number of type INT",
                ),
                (
                    ((SESSION, SET, "500"),),
                    f"{SESSION} {at_least} group.consumer.min.session.timeout.ms",
                ),
                (
                    ((INTERVAL, SET, "20000"),),
                    f"{INTERVAL} {at_most} group.consumer.max.heartbeat.interval.ms",
                ),
                (
                    ((SESSION, SET, "2000"), (INTERVAL, SET, "2000")),
                    f"{SESSION} must be greater than {INTERVAL}",
                ),
            ]
            for changes, why in refusals:
                assert await alter(client, "g", *changes) == (ErrorCode.INVALID_CONFIG, why)
            assert await alter(client, "", (SESSION, SET, "3000")) == (
                ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
            )  # fmt: skip
            # Kafka's controller asks whether a key is a list before whether it is known.
            assert await alter(client, "g", ("nope", 2, "1")) == (
                ErrorCode.INVALID_CONFIG, "Can't APPEND to key nope because its type is not LIST."
            )  # fmt: skip
            assert await alter(client, "g", (SESSION, SET, "3000"), (INTERVAL, SET, "250")) == (
                0,
                "",
            )
            assert await describe(client, "g") == (
                0, {SESSION: ("3000", GROUP_CONFIG, 3), INTERVAL: ("250", GROUP_CONFIG, 3)}
            )  # fmt: skip
            assert await joined_interval(client, "g") == 250
            assert await joined_interval(client, "other") == 500
            # The legacy AlterConfigs replaces the whole set, as for a topic.
            answer = await client.request(legacy_alter(GROUP, "h", {SESSION: "4000"}), 2)
            assert answer.responses[0].error_code == 0
            assert (await alter(client, "g", (INTERVAL, DELETE, None)))[0] == 0
    # Persisted: a restart on the directory has them, and a stock admin client reads them.
    with running(configs=CONFIGS, data_dir=tmp_path) as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="group-configs")
        try:
            described = admin.describe_configs(
                [
                    ConfigResource(ConfigResourceType.GROUP, "g"),
                    ConfigResource(ConfigResourceType.GROUP, "h"),
                ],
                config_filter="all",
            )
        finally:
            admin.close()
        values = {
            (name, key): entry["value"]
            for groups in described.values()
            for name, configs in groups.items()
            for key, entry in configs.items()
        }
        values = {k: v for k, v in values.items() if not k[1].startswith("share.")}
        assert values == {
            ("g", SESSION): "3000",
            ("g", INTERVAL): "500",
            ("h", SESSION): "4000",
            ("h", INTERVAL): "500",
        }


@pytest.mark.asyncio
async def test_a_share_groups_configs_are_described_checked_and_kept(tmp_path: Path) -> None:
    lock, reset = "share.record.lock.duration.ms", "share.auto.offset.reset"
    with running(configs=CONFIGS, topics=[("t", 1)], data_dir=tmp_path) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            # Kafka 4.2's share-group configs, with the broker's values as defaults.
            assert await describe_share(client, "s") == {
                "share.auto.offset.reset": ("latest", DEFAULT),
                "share.heartbeat.interval.ms": ("500", DEFAULT),
                "share.isolation.level": ("read_uncommitted", DEFAULT),
                lock: ("30000", DEFAULT),
                "share.session.timeout.ms": ("10000", DEFAULT),
            }
            invalid = ErrorCode.INVALID_CONFIG
            assert (await alter(client, "s", (lock, SET, "999")))[0] == invalid
            assert (await alter(client, "s", (reset, SET, "sometime")))[0] == invalid
            assert (await alter(client, "s", (reset, SET, "by_duration:PT")))[0] == invalid
            # Only read_uncommitted is served (README).
            level = ("share.isolation.level", SET, "read_committed")
            assert (await alter(client, "s", level))[0] == invalid
            changes = ((lock, SET, "15000"), (reset, SET, "by_duration:PT1H"))
            assert await alter(client, "s", *changes) == (0, "")
    with running(configs=CONFIGS, data_dir=tmp_path) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            described = await describe_share(client, "s")
            assert described[lock] == ("15000", GROUP_CONFIG)
            assert described[reset] == ("by_duration:PT1H", GROUP_CONFIG)
            assert server.server.broker.coordinator.group_configs.share_lock_ms == {"s": 15000}


@pytest.mark.asyncio
async def test_group_config_values_are_read_as_javas_integer_parse_reads_them(
    tmp_path: Path,
) -> None:
    # Kafka trims and takes a sign (`+250` is 250, in force and described so); `2_50` is not
    # a number to Java. The stored value is read the same way after a restart.
    with running(configs=CONFIGS, topics=[("t", 1)], data_dir=tmp_path) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            assert await alter(client, "g", (INTERVAL, SET, "2_50")) == (
                ErrorCode.INVALID_CONFIG,
                f"Invalid value 2_50 for configuration {INTERVAL}: Not a number of type INT",
            )
            changes = ((INTERVAL, SET, " +250 "), (SESSION, SET, "+3000"))
            assert await alter(client, "g", *changes) == (0, "")
            assert await joined_interval(client, "g") == 250
            assert await describe(client, "g") == (
                0, {SESSION: ("3000", GROUP_CONFIG, 3), INTERVAL: ("250", GROUP_CONFIG, 3)}
            )  # fmt: skip
    with running(configs=CONFIGS, data_dir=tmp_path) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            assert await joined_interval(client, "g") == 250
