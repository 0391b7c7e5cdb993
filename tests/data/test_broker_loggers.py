"""The BROKER_LOGGER config resource (type 8), as Kafka's RuntimeLoggerManager and
ConfigHelper answer it: DescribeConfigs lists the loggers with their levels (a stock admin
client), IncrementalAlterConfigs sets or unsets a level with Kafka's checks and words, and
the level is in force at once (a `minicoord serve` process stops printing a logger's lines);
the cluster's DescribeConfigs/AlterConfigs is required first (for the CLIENT_METRICS type too,
tests/data/test_client_metrics.py holding the rest of it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from datakit import incremental_alter, legacy_alter
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.consumer import JoinGroupRequest, LeaveGroupRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.process import start_server_process
from minicoord.testing.embedded import running

BROKER_LOGGER, CLIENT_METRICS = 8, 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_BROKER_LOGGER_CONFIG = 6
LOGGER = "minicoord.coordinator"
NO_ROOT_DELETE = "Removing the log level of the root logger is not allowed"
NOT_FOR_LOGGERS = "not allowed for the BROKER_LOGGER resource"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(autouse=True)
def restore_levels() -> Iterator[None]:
    # The embedded servers share this process's loggers: leave them as they were.
    saved = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    root = logging.getLogger().level
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logging.getLogger().setLevel(root)


async def describe(client: ProtocolClient, rtype: int, name: str, keys: Any = None) -> Any:
    answer = await client.request(
        DescribeConfigsRequest(
            version=4,
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=rtype, resource_name=name, configuration_keys=keys
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        ),
        4,
    )
    return answer.results[0]


async def alter(
    client: ProtocolClient, name: str, *changes: tuple[str, int, str | None], rtype: int = 8
) -> tuple[int, str]:
    answer = await client.request(incremental_alter(rtype, (name, changes)), 1)
    r = answer.responses[0]
    return r.error_code, r.error_message or ""


def test_a_stock_admin_client_describes_the_loggers() -> None:
    logging.getLogger(LOGGER).setLevel(logging.DEBUG)
    with running(configs={"broker.id": 2}) as s:
        admin = KafkaAdminClient(bootstrap_servers=s.bootstrap, request_timeout_ms=10_000)
        try:
            described = admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER_LOGGER, "2")], config_filter="all"
            )
        finally:
            admin.close()
    ((name, configs),) = [item for kind in described.values() for item in kind.items()]
    assert name == "2"
    levels = {key: entry["value"] for key, entry in configs.items()}
    # Every logger of the process, the root by Kafka's name, with effective levels.
    assert levels[LOGGER] == "DEBUG"
    root = logging.getLogger().getEffectiveLevel()
    assert levels["root"] == {10: "DEBUG", 20: "INFO", 30: "WARN", 40: "ERROR"}[root]
    assert "minicoord.broker" in levels
    assert set(levels.values()) <= {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "ALL"}


async def test_a_level_is_set_described_and_unset(raw_client: ProtocolClient) -> None:
    logging.getLogger().setLevel(logging.INFO)
    assert await alter(raw_client, "0", (LOGGER, SET, "TRACE")) == (0, "")
    assert logging.getLogger(LOGGER).isEnabledFor(5)
    result = await describe(raw_client, BROKER_LOGGER, "0", [LOGGER, "no.such.logger"])
    assert result.error_code == 0
    assert [(c.name, c.value, c.config_source, c.read_only) for c in result.configs] == [
        (LOGGER, "TRACE", DYNAMIC_BROKER_LOGGER_CONFIG, False)
    ]
    assert await alter(raw_client, "0", (LOGGER, SET, "ERROR")) == (0, "")
    assert not logging.getLogger(LOGGER).isEnabledFor(logging.WARNING)
    # Unset: the logger inherits its parent's level again.
    assert await alter(raw_client, "0", (LOGGER, DELETE, None)) == (0, "")
    assert logging.getLogger(LOGGER).level == logging.NOTSET
    result = await describe(raw_client, BROKER_LOGGER, "0", [LOGGER])
    assert [(c.name, c.value) for c in result.configs] == [(LOGGER, "INFO")]


@pytest.mark.parametrize(
    ("name", "change", "error", "message"),
    [
        ("0", ("no.such.logger", SET, "INFO"), 40, "Logger no.such.logger does not exist!"),
        ("0", ("no.such.logger", DELETE, None), 40, "Logger no.such.logger does not exist!"),
        (
            "0",
            (LOGGER, SET, "info"),
            40,
            f"Cannot set the log level of {LOGGER} to info as it is not a supported log level. "
            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
        ),
        ("0", ("root", DELETE, None), 42, NO_ROOT_DELETE),
        ("0", (LOGGER, APPEND, "INFO"), 42, f"APPEND operation is {NOT_FOR_LOGGERS}"),
        ("0", (LOGGER, SUBTRACT, "INFO"), 42, f"SUBTRACT operation is {NOT_FOR_LOGGERS}"),
        ("zero", (LOGGER, SET, "INFO"), 42, "Node id must be an integer, but it is: zero"),
        ("", (LOGGER, SET, "INFO"), 42, "Node id must be an integer, but it is: "),
        ("4294967296", (LOGGER, SET, "INFO"), 42, "Node id must be an integer, but it is: 4294967296"),  # noqa: E501
        ("7", (LOGGER, SET, "INFO"), 42, "Unexpected node id. Expected 0, but received 7"),
    ],
)  # fmt: skip
async def test_kafkas_refusals(
    raw_client: ProtocolClient, name: str, change: Any, error: int, message: str
) -> None:
    before = logging.getLogger(LOGGER).level
    # A refused change in a resource leaves its other changes unmade too.
    first = ("minicoord.broker", SET, "FATAL")
    assert await alter(raw_client, name, first, change) == (error, message)
    assert logging.getLogger("minicoord.broker").level != logging.CRITICAL
    assert logging.getLogger(LOGGER).level == before


async def test_validate_only_changes_nothing(raw_client: ProtocolClient) -> None:
    before = logging.getLogger(LOGGER).level
    request = incremental_alter(BROKER_LOGGER, ("0", [(LOGGER, SET, "FATAL")]))
    request.validate_only = True
    answer = await raw_client.request(request, 1)
    assert answer.responses[0].error_code == 0
    assert logging.getLogger(LOGGER).level == before


async def test_describe_checks_the_broker_id_as_kafka(raw_client: ProtocolClient) -> None:
    for name, message in (
        ("", "Broker id must not be empty"),
        ("x", "Broker id must be an integer, but it is: x"),
        ("5", "Unexpected broker id, expected 0 but received 5"),
    ):
        result = await describe(raw_client, BROKER_LOGGER, name)
        assert (result.error_code, result.error_message, result.configs) == (42, message, [])


async def test_legacy_alter_configs_does_not_take_loggers(raw_client: ProtocolClient) -> None:
    for rtype in (BROKER_LOGGER, 99):
        answer = await raw_client.request(legacy_alter(rtype, "0", {LOGGER: "DEBUG"}), 2)
        r = answer.responses[0]
        assert (r.error_code, r.error_message) == (42, f"Unknown resource type {rtype}")
    answer = await raw_client.request(incremental_alter(99, ("0", [(LOGGER, SET, "X")])), 1)
    assert (answer.responses[0].error_code, answer.responses[0].error_message) == (
        42,
        "Unknown resource type 99",
    )


async def test_the_cluster_is_authorized_first() -> None:
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with running(
        configs={"authorizer.class.name": AUTHORIZER},
        acls=["allow User:ANONYMOUS Describe cluster", "allow User:ANONYMOUS All topic:*"],
    ) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            for rtype, name in ((BROKER_LOGGER, "0"), (BROKER_LOGGER, "bad"), (CLIENT_METRICS, "")):
                result = await describe(client, rtype, name)
                assert (result.error_code, result.configs) == (denied, [])
                assert await alter(client, name, (LOGGER, SET, "nope"), rtype=rtype) == (
                    denied,
                    "Cluster authorization failed.",
                )
    with running(
        configs={"authorizer.class.name": AUTHORIZER},
        acls=["allow User:ANONYMOUS AlterConfigs cluster"],
    ) as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            # AlterConfigs implies DescribeConfigs, as in Kafka.
            assert (await describe(client, BROKER_LOGGER, "0")).error_code == 0
            assert await alter(client, "0", (LOGGER, SET, "WARN")) == (0, "")


async def test_a_served_process_stops_printing_a_silenced_loggers_lines() -> None:
    server = start_server_process()
    try:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            # The classic group's lines ("group G: ...") come from this logger at INFO.
            logger = LOGGER
            result = await describe(client, BROKER_LOGGER, "0", [logger, "root"])
            assert {c.name: c.value for c in result.configs} == {logger: "INFO", "root": "INFO"}
            await _join_and_leave(client, "loud")
            assert await alter(client, "0", (logger, SET, "ERROR")) == (0, "")
            await _join_and_leave(client, "quiet")
            result = await describe(client, BROKER_LOGGER, "0", [logger])
            assert {c.name: c.value for c in result.configs} == {logger: "ERROR"}
    finally:
        server.stop()
    stderr = server.log
    # A request whose answer printed a group line before the change; none after it.
    assert "group loud: member" in stderr
    assert f"Updated the log level of {LOGGER} to ERROR" in stderr
    assert "group quiet" not in stderr


async def _join_and_leave(client: ProtocolClient, group: str) -> None:
    join = JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        reason=None,
    )  # fmt: skip
    answer = await client.request(join, 9)
    if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        join.member_id = answer.member_id
        answer = await client.request(join, 9)
    assert answer.error_code == 0, answer
    member = LeaveGroupRequest.MemberIdentity(
        member_id=answer.member_id, group_instance_id=None, reason=None
    )
    leave = LeaveGroupRequest(group_id=group, members=[member])
    assert (await client.request(leave, 5)).error_code == 0


async def test_debug_on_the_request_logger_turns_the_request_log_on_until_the_server_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    requests = logging.getLogger("minicoord.requests")
    before = requests.level
    with running() as s:
        host, port = s.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            assert s.server.broker.request_log is None  # off at INFO
            assert await alter(client, "0", ("minicoord.requests", SET, "DEBUG")) == (0, "")
            assert s.server.broker.request_log is not None
            await describe(client, BROKER_LOGGER, "0", ["root"])
            assert any(
                r.name == "minicoord.requests" and r.message.startswith("DescribeConfigs v4")
                for r in caplog.records
            )
    # Put back when the server stopped: a later server in this process logs as before.
    assert requests.level == before
