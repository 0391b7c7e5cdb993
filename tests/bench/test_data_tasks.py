"""The data scenario's task code without Spark: one task, stock librdkafka clients against a
real minicoord process, rows checked as the report reads them; and its pacing and shares."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from minicoord.bench.data_scenario import task_share
from minicoord.bench.rdkafka_clients import STAMP, produce_paced
from minicoord.bench.targets import Target, prepare_topic
from minicoord.bench.tasks import ROW_FIELDS, TaskPlan, run_plan
from minicoord.server.process import ServerProcess

PARTITIONS = 4
KIND, OP, VALUE, ERROR = (ROW_FIELDS.index(f) for f in ("kind", "op", "value", "error"))
LATENCY, STEP = ROW_FIELDS.index("latency_ms"), ROW_FIELDS.index("step")


def plan(server: ServerProcess, step: str, label: str, **params: Any) -> TaskPlan:
    base = {
        "record_bytes": 256,
        "partitions": PARTITIONS,
        "timeout_s": 30,
        "duration_s": 1.0,
        # A member that joins learns of a rebalance from its next heartbeat: keep it short.
        "consumer_config": {"heartbeat.interval.ms": 200},
    }
    return TaskPlan(
        "data",
        "minicoord",
        server.bootstrap,
        0,
        1,
        [(label, [])],
        {**base, "data_step": step, **params},
        server_pid=server.proc.pid,
    )


def totals(rows: list[tuple]) -> dict[str, tuple[float, int]]:
    return {r[OP]: (r[VALUE], r[ERROR]) for r in rows if r[KIND] == "total"}


def gauges(rows: list[tuple]) -> dict[str, float]:
    return {r[OP]: r[VALUE] for r in rows if r[KIND] == "gauge"}


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory()


async def test_produce_then_consume_every_record(server: ServerProcess) -> None:
    topic = f"data-{uuid.uuid4().hex[:8]}"
    await _in_thread(prepare_topic, Target("minicoord", server.bootstrap), topic, PARTITIONS)
    produced = await run_plan(
        plan(server, "produce", "produce", data_topic=topic, step_records=2_000)
    )
    assert totals(produced)["produce"] == (2_000, 0)
    g = gauges(produced)
    # The bench's /proc readers saw this task, the server and the machine. The server's and
    # the machine's counts are whole clock ticks (10 ms): a quick step may see none pass.
    assert g["client_cpu_s"] > 0 and g["server_cpu_s"] >= 0 and g["host_busy_s"] >= 0
    assert g["server_rss_kib"] > 10_000 and "server_rss_anon_kib" in g

    consumed = await run_plan(
        plan(server, "consume", "consume", data_topic=topic, data_group=f"{topic}-g")
    )
    t = totals(consumed)
    assert t["consume"] == (2_000, 0)
    # What the server said the partitions hold, and no partition left unread.
    assert t["consume_expected"] == (2_000, 0)
    assert {r[STEP] for r in consumed} <= {"consume", "unfinished"}


async def test_e2e_latency_of_every_record_after_the_warm_up(server: ServerProcess) -> None:
    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    await _in_thread(prepare_topic, Target("minicoord", server.bootstrap), topic, PARTITIONS)
    rows = await run_plan(
        plan(
            server, "e2e", "e2e rate=400", data_topic=topic, data_group=f"{topic}-g", step_rate=400
        )
    )
    t = totals(rows)
    produced, failed = t["produce"]
    # 0.5 s warm-up and 1 s measured at 400/s: every record produced was consumed.
    assert failed == 0 and 500 <= produced <= 610
    assert t["consume"] == (produced, 0)
    latencies = [r[LATENCY] for r in rows if r[OP] == "e2e"]
    assert 350 <= len(latencies) < produced  # the warm-up's records carry no latency
    assert all(0 < ms < 10_000 for ms in latencies)
    assert gauges(rows)["offered_rate"] == 400


class _FakeProducer:
    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.polls = 0

    def produce(self, topic: str, value: bytes) -> None:
        self.values.append(value)

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def test_paced_producer_holds_the_rate_and_marks_the_warm_up() -> None:
    fake = _FakeProducer()
    start = time.perf_counter()
    sent = produce_paced(fake, "t", 1000.0, start, start + 0.3, b"x" * 8, start + 0.1)
    assert sent == len(fake.values)
    # 300 due in 0.3 s; a slow wake-up sends what is due, never more than the schedule.
    assert 290 <= sent <= 300
    stamps = [STAMP.unpack_from(v)[0] for v in fake.values]
    warm = [s for s in stamps if s < 0]
    assert 80 <= len(warm) <= 110 and stamps[: len(warm)] == warm
    assert all(len(v) == STAMP.size + 8 for v in fake.values)
    assert fake.polls > 0


def test_task_shares_add_up_and_differ_by_one_at_most() -> None:
    for total, tasks in ((10, 3), (3, 5), (1_000_000, 7), (0, 2)):
        shares = [task_share(total, t, tasks) for t in range(tasks)]
        assert sum(shares) == total and max(shares) - min(shares) <= 1


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    # prepare_topic runs an event loop of its own: not inside this test's.
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
