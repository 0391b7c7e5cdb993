"""Fault injection, each action shown with a real client (aiokafka) reacting to it.

The server runs embedded (minicoord.testing.running) on its own thread; the client runs in
the test's event loop. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import OffsetMetadataTooLargeError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from kafka.protocol.consumer import HeartbeatRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.process import start_server_process
from minicoord.testing import EmbeddedServer, running

TOPIC = "faults"


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.assignments: list[set[int]] = []

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.assignments.append({tp.partition for tp in assigned})


async def wait_for(check: Callable[[], bool], consumers: list[Any], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.gather(*(c.getmany(timeout_ms=20) for c in consumers))
    raise AssertionError("condition not reached in time")


@pytest.fixture
def server() -> EmbeddedServer:
    with running(
        configs={"group.min.session.timeout.ms": 1000}, topics=[(TOPIC, 4)], control_port=0
    ) as s:
        yield s  # type: ignore[misc]


async def start_group(
    server: EmbeddedServer, group_id: str, session_ms: int = 6000
) -> tuple[list[AIOKafkaConsumer], list[Listener]]:
    """Two aiokafka members of one group, once they split the topic."""
    consumers, listeners = [], []
    for _ in range(2):
        listener = Listener()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=server.bootstrap,
            group_id=group_id,
            enable_auto_commit=False,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=100,
            retry_backoff_ms=50,
        )
        consumer.subscribe([TOPIC], listener=listener)
        await consumer.start()
        consumers.append(consumer)
        listeners.append(listener)

    def stable() -> bool:
        current = [c.assignment() for c in consumers]
        return sum(len(a) for a in current) == 4 and all(current)

    await wait_for(stable, consumers)
    return consumers, listeners


@pytest.fixture
async def group(
    server: EmbeddedServer, group_id: str
) -> AsyncIterator[tuple[list[AIOKafkaConsumer], list[Listener]]]:
    consumers, listeners = await start_group(server, group_id)
    yield consumers, listeners
    for consumer in consumers:
        await consumer.stop()


def generation(server: EmbeddedServer, group_id: str) -> int:
    return server.call(
        lambda: server.server.broker.coordinator.groups.groups[group_id].generation_id
    )


async def test_forced_rebalance_reassigns_a_stable_group(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, listeners = group
    before = generation(server, group_id)
    counts = [len(x.assignments) for x in listeners]
    assert server.control.force_rebalance(group_id) is True
    await wait_for(
        lambda: all(len(x.assignments) > n for x, n in zip(listeners, counts, strict=True)),
        consumers,
    )
    assert generation(server, group_id) == before + 1
    assert server.control.force_rebalance("no-such-group") is False


async def test_injected_heartbeat_error_makes_the_member_rejoin(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, _ = group
    before = generation(server, group_id)
    ids = {c._coordinator.member_id for c in consumers}
    # UNKNOWN_MEMBER_ID makes the member drop its id and join as a new member.
    server.control.fail_next("Heartbeat", 1, "UNKNOWN_MEMBER_ID", group_id=group_id)
    await wait_for(lambda: generation(server, group_id) > before, consumers)
    await wait_for(lambda: {c._coordinator.member_id for c in consumers} != ids, consumers)
    await wait_for(lambda: all(c.assignment() for c in consumers), consumers)
    rules = server.call(lambda: list(server.server.broker.faults.fail_rules))
    assert rules == []  # used up


async def test_injected_commit_error_reaches_the_caller_once(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, _ = group
    owned = next(iter(consumers[0].assignment()))
    server.control.fail_next("OffsetCommit", 1, "OFFSET_METADATA_TOO_LARGE")
    with pytest.raises(OffsetMetadataTooLargeError):
        await asyncio.wait_for(consumers[0].commit({owned: OffsetAndMetadata(5, "")}), 10)
    # The failure changed nothing and was used up: the next commit lands.
    assert await consumers[0].committed(owned) is None
    await asyncio.wait_for(consumers[0].commit({owned: OffsetAndMetadata(6, "")}), 10)
    assert await consumers[0].committed(owned) == 6


async def test_latency_slows_a_clients_calls(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, _ = group
    owned = next(iter(consumers[0].assignment()))
    await consumers[0].commit({owned: OffsetAndMetadata(9, "")})
    server.control.add_latency("OffsetFetch", 400, duration_ms=10_000)
    started = time.monotonic()
    assert await asyncio.wait_for(consumers[0].committed(owned), 10) == 9
    # libuv keeps timers in whole milliseconds of a clock read once per loop turn, so the
    # 400 ms delay can end up to a millisecond or so early on the client's clock.
    assert time.monotonic() - started >= 0.395
    server.control.clear()
    started = time.monotonic()
    assert await asyncio.wait_for(consumers[0].committed(owned), 10) == 9
    assert time.monotonic() - started < 0.4


async def test_latency_holds_back_the_answer(server: EmbeddedServer) -> None:
    host, port = server.bootstrap.rsplit(":", 1)
    server.control.add_latency("Heartbeat", 300, duration_ms=10_000)
    async with await ProtocolClient.connect(host, int(port)) as client:
        request = HeartbeatRequest(
            version=4, group_id="none", generation_id=1, member_id="m", group_instance_id=None
        )
        started = time.monotonic()
        response = await asyncio.wait_for(client.request(request), 10)
        assert time.monotonic() - started >= 0.3
        assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    server.control.clear()


async def test_coordinator_moved_then_back(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, _ = group
    owned = next(iter(consumers[0].assignment()))
    moved = server.control.coordinator_moved(1500, group_id=group_id)
    assert moved == [server.call(lambda: server.server.broker.coordinator.partition_for(group_id))]
    started = time.monotonic()
    # aiokafka gets NOT_COORDINATOR, rediscovers the coordinator (unavailable while "moved")
    # and retries; the commit lands once the coordinator is back.
    await asyncio.wait_for(consumers[0].commit({owned: OffsetAndMetadata(11, "")}), 20)
    assert time.monotonic() - started >= 1.0
    assert await consumers[0].committed(owned) == 11


@pytest.mark.parametrize("fault", ["moved", "loading"])
async def test_members_outlive_a_fault_longer_than_their_session(
    server: EmbeddedServer, group_id: str, fault: str
) -> None:
    # Members that cannot reach their coordinator are not expired for it: Kafka runs no
    # timers for a partition it does not hold and gives every member a fresh session when
    # the partition is loaded again. So the group carries on, in the same generation.
    consumers, _ = await start_group(server, group_id, session_ms=1000)
    try:
        before = generation(server, group_id)
        ids = {c._coordinator.member_id for c in consumers}
        held = [c.assignment() for c in consumers]
        inject = getattr(server.control, f"coordinator_{fault}")
        inject(2500, group_id=group_id)
        deadline = time.monotonic() + 4.5  # the fault, then four sessions more
        while time.monotonic() < deadline:
            await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        assert generation(server, group_id) == before
        assert {c._coordinator.member_id for c in consumers} == ids
        assert [c.assignment() for c in consumers] == held
    finally:
        for consumer in consumers:
            await consumer.stop()


async def test_coordinator_loading_then_loaded(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, _ = group
    owned = next(iter(consumers[0].assignment()))
    await consumers[0].commit({owned: OffsetAndMetadata(3, "")})
    server.control.coordinator_loading(1000, group_id=group_id)
    started = time.monotonic()
    # For a second OffsetFetch answers the group's COORDINATOR_LOAD_IN_PROGRESS alone, with no
    # partitions, as Kafka answers v2+ (OffsetFetchRequest.getErrorResponse). aiokafka reads
    # only partitions' errors, so it sees no committed offset meanwhile, as it would against
    # Kafka (sarama and librdkafka have had the same blind spot); then it reads 3 again.
    assert await asyncio.wait_for(consumers[0].committed(owned), 20) is None
    committed = None
    while committed != 3 and time.monotonic() - started < 10:
        await asyncio.sleep(0.1)
        committed = await asyncio.wait_for(consumers[0].committed(owned), 20)
    assert committed == 3
    assert time.monotonic() - started >= 0.8


async def test_expiring_a_member_makes_it_rejoin_as_a_new_member(
    server: EmbeddedServer, group: Any, group_id: str
) -> None:
    consumers, _ = group
    old_ids = {c._coordinator.member_id for c in consumers}
    victim = consumers[1]._coordinator.member_id
    assert server.control.expire_member(group_id, victim) is True

    def server_view() -> tuple[str, set[str]]:
        group = server.server.broker.coordinator.groups.groups[group_id]
        return group.state.value, set(group.members)

    def settled() -> bool:
        state, members = server.call(server_view)
        return (
            state == "Stable"
            and len(members) == 2
            and {c._coordinator.member_id for c in consumers} == members
        )

    await wait_for(settled, consumers)
    _, members = server.call(server_view)
    assert victim not in members and members != old_ids


def test_ctl_cli_drives_a_running_server(group_id: str) -> None:
    proc = start_server_process(
        {"group.min.session.timeout.ms": 1000}, [(TOPIC, 2)], extra_args=["--control-port", "0"]
    )
    try:
        deadline = time.monotonic() + 10
        port = None
        while port is None and time.monotonic() < deadline:
            found = re.search(r"control API on 127\.0\.0\.1:(\d+)", proc.log)
            port = int(found.group(1)) if found else None
            time.sleep(0.05)
        assert port is not None, proc.log

        def ctl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "minicoord.server.cli",
                    "ctl",
                    "--control",
                    f"127.0.0.1:{port}",
                    *args,
                ],
                capture_output=True,
                text=True,
                timeout=20,
            )

        missing = ctl("rebalance", group_id)  # no such group yet
        assert missing.returncode == 1 and f"group {group_id} does not exist" in missing.stderr
        assert ctl("fail", "Heartbeat", "NOT_COORDINATOR", "--count", "2").returncode == 0
        assert ctl("latency", "Metadata", "5", "--duration-ms", "100").returncode == 0
        assert json.loads(ctl("--json", "moved", "200", "--group", group_id).stdout)["result"]
        assert ctl("clear").returncode == 0
        bad = ctl("fail", "NoSuchApi", "NONE")
        assert bad.returncode == 2 and "unknown API" in bad.stderr
    finally:
        proc.stop()


async def scrape_metrics(server: EmbeddedServer) -> str:
    """The server's Prometheus page, fetched over HTTP as a scraper would."""
    url = f"http://127.0.0.1:{server.server.metrics_port}/metrics"
    return await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read().decode())


async def test_metrics_endpoint_reports_the_group(group_id: str) -> None:
    with running(topics=[(TOPIC, 2)], metrics_port=0) as server:
        consumer = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=server.bootstrap,
            group_id=group_id,
            session_timeout_ms=6000,
            heartbeat_interval_ms=100,
        )
        await consumer.start()
        try:
            await wait_for(lambda: len(consumer.assignment()) == 2, [consumer])
            body = await scrape_metrics(server)
        finally:
            await consumer.stop()
    assert re.search(r'minicoord_groups\{protocol="classic",state="Stable"\} 1\.0', body), body
    assert re.search(r"minicoord_members 1\.0", body)
    assert re.search(r'minicoord_requests_total\{api="JoinGroup",version="\d+"\} [1-9]', body)
    assert re.search(r'minicoord_rebalances_total\{protocol="classic",state="Stable"\} [1-9]', body)
    assert re.search(r"minicoord_join_latency_seconds_count [1-9]", body)
    assert "minicoord_request_latency_seconds_bucket" in body


async def test_errors_metric_counts_each_partitions_error(group_id: str) -> None:
    # As Kafka's ErrorsPerSec counts a response's errorCounts: a commit refused for two
    # partitions is two OFFSET_METADATA_TOO_LARGE, though its answer has no top-level error.
    with running(topics=[(TOPIC, 2)], metrics_port=0) as server:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=server.bootstrap, group_id=group_id, enable_auto_commit=False
        )
        await consumer.start()
        try:
            parts = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
            consumer.assign(parts)
            with pytest.raises(OffsetMetadataTooLargeError):
                too_large = OffsetAndMetadata(5, "x" * 5000)
                await asyncio.wait_for(consumer.commit(dict.fromkeys(parts, too_large)), 10)
            await asyncio.wait_for(consumer.commit({parts[0]: OffsetAndMetadata(6, "")}), 10)
            body = await scrape_metrics(server)
        finally:
            await consumer.stop()
    pattern = r'minicoord_errors_total\{api="OffsetCommit",error="OFFSET_METADATA_TOO_LARGE"\} 2\.0'
    assert re.search(pattern, body), body


def test_the_readmes_table_of_control_methods_names_their_parameters() -> None:
    # The table is how users call `server.control`: each method it lists exists, takes the
    # parameters it names (a wrong keyword is a TypeError), and in that order.
    import inspect
    from pathlib import Path

    from minicoord.server.faults import Controller

    readme = Path(__file__).resolve().parents[2] / "README.md"
    rows = re.findall(r"^\| `(\w+)\(([^)]*)\)` \| `", readme.read_text(), re.MULTILINE)
    assert len(rows) >= 10, rows
    for name, params in rows:
        method = getattr(Controller, name)
        expected = [p.split("=")[0].strip() for p in params.split(",") if p.strip()]
        actual = list(inspect.signature(method).parameters)[1:]
        assert actual == expected, (name, actual, expected)
