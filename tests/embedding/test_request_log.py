"""The request log (`minicoord.requests`): one DEBUG line per answered request, rate-limited
INFO lines for refusals a client cannot get past, JSON lines with --log-format json, and no
work at all while DEBUG is off.

Real clients on real sockets: aiokafka against an embedded server, raw frames through the
lean protocol client, and a `minicoord serve` process for the JSON output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import OffsetMetadataTooLargeError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from kafka.protocol.metadata import ApiVersionsRequest
from minicoord.clients.connection import ConnectionClosed, ProtocolClient
from minicoord.protocol.consumer_group_apis import ConsumerGroupHeartbeatRequest
from minicoord.server.app import Server
from minicoord.server.config import Config
from minicoord.server.process import start_server_process
from minicoord.testing import running

TOPIC = "logged"
REQUESTS = "minicoord.requests"
BURST = 20


def request_records(caplog: pytest.LogCaptureFixture, api: str) -> list[Any]:
    """The request lines of one API: LogRecords carrying the line's fields as attributes."""
    return [
        r
        for r in caplog.records
        if r.name == REQUESTS
        and getattr(r, "event", None) == "request"
        and getattr(r, "api", None) == api
    ]


async def poll_until(check: Callable[[], bool], consumer: AIOKafkaConsumer, timeout: float) -> None:
    """Poll the consumer (which drives its group membership) until `check` holds."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.02) + 1):
        if check():
            return
        if time.monotonic() > deadline:
            break
        await consumer.getmany(timeout_ms=20)
    raise AssertionError("condition not reached in time")


async def test_debug_lines_name_a_real_clients_join_and_commits(
    caplog: pytest.LogCaptureFixture, group_id: str
) -> None:
    caplog.set_level(logging.DEBUG, logger=REQUESTS)
    configs = {"group.min.session.timeout.ms": 1000, "offset.metadata.max.bytes": 16}
    with running(configs=configs, topics=[(TOPIC, 2)]) as server:
        assert server.call(lambda: server.server.broker.request_log) is not None
        consumer = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=server.bootstrap,
            group_id=group_id,
            client_id="logged-consumer",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=100,
        )
        await asyncio.wait_for(consumer.start(), 20)
        try:
            await poll_until(lambda: len(consumer.assignment()) == 2, consumer, 20)
            tp = TopicPartition(TOPIC, 1)
            await asyncio.wait_for(consumer.commit({tp: OffsetAndMetadata(7, "ok")}), 10)
            with pytest.raises(OffsetMetadataTooLargeError):
                too_long = OffsetAndMetadata(8, "x" * 17)
                await asyncio.wait_for(consumer.commit({tp: too_long}), 10)
        finally:
            await asyncio.wait_for(consumer.stop(), 20)

    joins = request_records(caplog, "JoinGroup")
    assert joins, caplog.text
    for record in joins:
        assert record.group == [group_id] and record.client_id == "logged-consumer"
        text = record.getMessage()
        assert text.startswith(f"JoinGroup v{record.api_version} peer=127.0.0.1:")
        assert f"client_id=logged-consumer group={group_id}" in text
        assert f"error={record.error}" in text and text.endswith(f"ms={record.ms}")
    # The answer's time is taken when it is sent: a parked JoinGroup is answered later.
    assert joins[-1].error == "NONE" and joins[-1].member[0].startswith("logged-consumer-")
    assert any(r.error == "NONE" for r in request_records(caplog, "SyncGroup"))

    commits = request_records(caplog, "OffsetCommit")
    assert [r.error for r in commits] == ["NONE", "OFFSET_METADATA_TOO_LARGE"], caplog.text
    for record in commits:
        assert record.group == [group_id] and record.topics == [TOPIC]
        assert record.member == joins[-1].member
        assert f"topics={TOPIC} error={record.error} ms=" in record.getMessage()


async def test_nothing_is_logged_or_timed_per_request_while_debug_is_off(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger=REQUESTS)
    from minicoord.server.request_log import RequestLog

    def fail(*_: Any, **__: Any) -> None:
        raise AssertionError("the request log ran while DEBUG is off")

    monkeypatch.setattr(RequestLog, "observer", fail)
    monkeypatch.setattr(RequestLog, "answered", fail)
    async with Server(Config(), "127.0.0.1", 0, topics=[(TOPIC, 1)]) as server:
        assert server.broker.request_log is None
        async with await ProtocolClient.connect("127.0.0.1", server.port, "quiet") as client:
            await asyncio.wait_for(
                client.request(
                    ApiVersionsRequest(
                        version=3, client_software_name="t", client_software_version="1"
                    )
                ),
                5,
            )
            heartbeat = HeartbeatRequest(
                version=4, group_id="g", generation_id=1, member_id="m", group_instance_id=None
            )
            answer = await asyncio.wait_for(client.request(heartbeat), 5)
            assert answer.error_code != 0  # answered (an unknown member), and not logged
        # No answer hook is even made for a request: the connection read one attribute.
        assert all(conn._observe is None for conn in server.broker.connections)
    assert not [r for r in caplog.records if r.name == REQUESTS]


async def _unserved(port: int, client_id: str) -> None:
    """AddRaftVoter (key 80), which minicoord does not serve: the connection is closed."""
    client = await ProtocolClient.connect("127.0.0.1", port, client_id)
    header = struct.pack(">hhih", 80, 0, 1, len(client_id)) + client_id.encode()
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(client.request_raw(header, 1), 5)
    await client.close()


async def test_refusals_are_logged_once_per_client_and_reason_in_a_burst(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=REQUESTS)
    async with Server(Config(), "127.0.0.1", 0, topics=[(TOPIC, 1)]) as server:
        port = server.port
        for _ in range(BURST):  # a client retrying an API it should not use, reconnecting
            await _unserved(port, "looper")
        await _unserved(port, "other")
        heartbeat = HeartbeatRequest(
            version=4, group_id="g", generation_id=1, member_id="m", group_instance_id=None
        )
        for _ in range(BURST):  # a version we do not serve: the connection is closed
            async with await ProtocolClient.connect("127.0.0.1", port, "looper") as client:
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(client.request_raw(_at_version(heartbeat, 9), 2), 5)
        async with await ProtocolClient.connect("127.0.0.1", port, "looper") as client:
            for _ in range(BURST):  # refused by the coordinator: an unknown server assignor
                answer = await asyncio.wait_for(client.request(_joining("no-such-assignor"), 1), 5)
                assert answer.error_code == 112  # UNSUPPORTED_ASSIGNOR
        refusals: list[Any] = [r for r in caplog.records if r.name == REQUESTS]
        assert [(r.levelno, r.client_id, r.api) for r in refusals] == [
            (logging.INFO, "looper", "AddRaftVoter"),
            (logging.INFO, "other", "AddRaftVoter"),
            (logging.INFO, "looper", "Heartbeat"),
            (logging.INFO, "looper", "ConsumerGroupHeartbeat"),
        ], caplog.text
        assert refusals[3].group == ["g848"]  # a field of the JSON line, as the README says
        assert not hasattr(refusals[0], "group")  # a request that names no group
        assert refusals[3].getMessage() == (
            "refused ConsumerGroupHeartbeat v1 from 127.0.0.1 client_id=looper: "
            "UNSUPPORTED_ASSIGNOR (ServerAssignor no-such-assignor is not supported. "
            "Supported assignors: uniform, range.)"
        )
        assert "API key 80 is not one minicoord serves" in refusals[0].getMessage()
        assert "connection closed" in refusals[0].getMessage()
        assert refusals[2].getMessage().startswith("refused Heartbeat v9 from 127.0.0.1:")
        assert "UNSUPPORTED_VERSION (minicoord serves v0-4; connection closed)" in (
            refusals[2].getMessage()
        )
        # When the window has passed, the next one is logged with the count held back.
        server.broker.refusals.window_s = 0
        await _unserved(port, "looper")
    last: Any = [r for r in caplog.records if r.name == REQUESTS][-1]
    assert last.held_back == BURST - 1
    assert f"{BURST - 1} more like it since the last line like it, not logged" in last.getMessage()


async def test_join_and_sync_refusals_name_the_clients_own_settings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=REQUESTS)
    config = Config.from_pairs([("group.initial.rebalance.delay.ms", "0")])
    async with (
        Server(config, "127.0.0.1", 0, topics=[(TOPIC, 1)]) as server,
        await ProtocolClient.connect("127.0.0.1", server.port, "joiner") as client,
    ):
        short = await asyncio.wait_for(client.request(_join("g", 10, "range"), 9), 5)
        assert short.error_code == 26  # INVALID_SESSION_TIMEOUT
        # A member holds the group to range; one that only speaks roundrobin is refused.
        first = await asyncio.wait_for(client.request(_join("g", 10_000, "range"), 9), 5)
        assert first.error_code == 79  # MEMBER_ID_REQUIRED
        joined = await asyncio.wait_for(
            client.request(_join("g", 10_000, "range", first.member_id), 9), 5
        )
        assert joined.error_code == 0, joined
        odd = await asyncio.wait_for(client.request(_join("g", 10_000, "roundrobin"), 9), 5)
        assert odd.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        sync = SyncGroupRequest(
            group_id="g",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="roundrobin",  # v5 names what it believes was chosen: not so
            assignments=[],
        )
        synced = await asyncio.wait_for(client.request(sync, 5), 5)
        assert synced.error_code == 23
    refusals = [r.getMessage().split(": ", 1) for r in caplog.records if r.name == REQUESTS]
    assert [(head.split(" from ")[0], line) for head, line in refusals] == [
        (
            "refused JoinGroup v9",
            "INVALID_SESSION_TIMEOUT (group 'g': session.timeout.ms=10 is outside "
            f"group.min.session.timeout.ms={config.group_min_session_timeout_ms} .. "
            f"group.max.session.timeout.ms={config.group_max_session_timeout_ms})",
        ),
        (
            "refused JoinGroup v9",
            "INCONSISTENT_GROUP_PROTOCOL (group 'g': protocol type 'consumer' with "
            "[roundrobin] matches no member's)",
        ),
        ("refused SyncGroup v5", "INCONSISTENT_GROUP_PROTOCOL (group 'g')"),
    ], caplog.text
    assert [r.group for r in caplog.records if r.name == REQUESTS] == [["g"]] * 3


def _join(group: str, session_ms: int, protocol: str, member_id: str = "") -> Any:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=protocol, metadata=b"")],
        reason=None,
    )


def _joining(assignor: str) -> Any:
    """A consumer-protocol member's first heartbeat (epoch 0) asking for a server assignor."""
    return ConsumerGroupHeartbeatRequest(
        group_id="g848",
        member_id="m-1",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[TOPIC],
        subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=[],
    )


def _at_version(request: Any, version: int) -> bytes:
    """A request's header and body with its version field rewritten (no client sends this)."""
    request.with_header(correlation_id=2, client_id="looper")
    data = bytearray(request.encode(header=True))
    struct.pack_into(">h", data, 2, version)
    return bytes(data)


def test_json_log_lines_parse() -> None:
    proc = start_server_process(
        {}, [(TOPIC, 1)], extra_args=["--log-format", "json", "--log-level", "DEBUG"]
    )
    try:

        async def traffic() -> None:
            async with await ProtocolClient.connect("127.0.0.1", proc.port, "json-client") as c:
                await asyncio.wait_for(
                    c.request(
                        ApiVersionsRequest(
                            version=3, client_software_name="t", client_software_version="1"
                        )
                    ),
                    5,
                )
            await _unserved(proc.port, "json-client")

        asyncio.run(traffic())
    finally:
        assert proc.stop() == 0
    lines = proc.log.splitlines()
    assert lines, "the server wrote no log"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    for record in records:
        assert {"ts", "level", "logger", "message"} <= set(record), record
        assert record["ts"].endswith("Z")
    (request,) = [r for r in records if r.get("event") == "request" and r["api"] == "ApiVersions"]
    assert request["level"] == "DEBUG" and request["logger"] == REQUESTS
    assert request["client_id"] == "json-client" and request["api_version"] == 3
    assert request["error"] == "NONE" and request["ms"] >= 0
    (refused,) = [r for r in records if r.get("event") == "refused"]
    assert refused["level"] == "INFO" and refused["api"] == "AddRaftVoter"
    assert refused["client_id"] == "json-client"
    assert any(
        r["logger"] == "minicoord.server" and r["message"] == "shutting down" for r in records
    )


def test_a_log_level_set_through_one_server_is_the_processs_until_it_stops() -> None:
    # Python's logging is per process: DEBUG set through server A turns on B's request log
    # too (not only A's), and A puts the level back when it stops, so the servers of later
    # tests do not start logging every request.
    requests = logging.getLogger("minicoord.requests")
    level = logging.getLogger("minicoord").level

    def logging_requests(server: Any) -> bool:
        return server.call(lambda: server.server.broker.request_log is not None)

    with running() as b:
        with running() as a:
            assert not logging_requests(a) and not logging_requests(b)
            a.control.set_log_level("DEBUG")
            assert requests.isEnabledFor(logging.DEBUG)
            assert logging_requests(a) and logging_requests(b)
        assert logging.getLogger("minicoord").level == level
        assert not logging_requests(b)
    with running() as later:
        assert not logging_requests(later)


def test_levels_are_put_back_only_when_every_server_that_set_them_stopped() -> None:
    # Two servers set DEBUG; whichever order they stop in, the level stays while one of them
    # runs and is put back when the last stops (not to the other's DEBUG).
    level = logging.getLogger("minicoord").level
    a = running()
    b = running()
    first, second = a.__enter__(), b.__enter__()
    try:
        first.control.set_log_level("DEBUG")
        second.control.set_log_level("DEBUG")
    finally:
        a.__exit__(None, None, None)  # the first one started stops first
    assert logging.getLogger("minicoord").level == logging.DEBUG
    assert second.call(lambda: second.server.broker.request_log is not None)
    b.__exit__(None, None, None)
    assert logging.getLogger("minicoord").level == level


def test_offset_fetch_v8_and_later_name_each_groups_member_and_topics() -> None:
    # v8+ moved the member and topics into groups[]; librdkafka sends v9 in both protocols.
    from minicoord.protocol.apis import SPECS
    from minicoord.server.request_log import request_fields

    request = SPECS[9].request
    group, topic = (
        request.OffsetFetchRequestGroup,
        request.OffsetFetchRequestGroup.OffsetFetchRequestTopics,
    )
    v9 = request(
        version=9,
        groups=[
            group(
                group_id="a",
                member_id="m-a",
                member_epoch=3,
                topics=[topic(name="orders", partition_indexes=[0])],
            ),
            group(group_id="b", member_id=None, member_epoch=-1, topics=None),
        ],
        require_stable=False,
    )
    assert request_fields(9, v9) == {"group": ["a", "b"], "member": ["m-a"], "topics": ["orders"]}
    v8 = request(
        version=8,
        groups=[group(group_id="a", topics=[topic(name="x", partition_indexes=[1])])],
        require_stable=False,
    )
    assert request_fields(9, v8) == {"group": ["a"], "topics": ["x"]}


def test_add_partitions_to_txn_partition_errors_are_named_and_counted() -> None:
    """AddPartitionsToTxn v0-3 carries its errors per partition, as partition_error_code:
    the log line names them and the errors metric counts each (Kafka's errorCounts)."""
    from kafka.protocol.producer import AddPartitionsToTxnResponse
    from minicoord.protocol.apis import SPECS
    from minicoord.protocol.errors import ErrorCode
    from minicoord.server.request_log import answer_errors, error_counts

    topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    partition = topic.AddPartitionsToTxnPartitionResult
    mapping = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    answer = AddPartitionsToTxnResponse(
        version=3,
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            topic(
                name="t",
                results_by_partition=[
                    partition(partition_index=0, partition_error_code=mapping),
                    partition(partition_index=1, partition_error_code=mapping),
                ],
            )
        ],
    )
    assert error_counts(answer) == [mapping, mapping]
    assert answer_errors(SPECS[24], 3, answer) == (["INVALID_PRODUCER_ID_MAPPING"], None)
