"""Comparing targets in rounds, without Spark: round tags on step labels, the barrier's
common start past Spark's allGather lag, the plans of head-to-head and data, the medians of
per-round ratios and the head-to-head table."""

from __future__ import annotations

import time
from typing import Any

import pytest
from minicoord.bench import task_sync
from minicoord.bench.comparison import head_to_head, round_medians
from minicoord.bench.planning import plan_jobs
from minicoord.bench.scenario_args import build_parser, options
from minicoord.bench.task_run import round_step, split_round
from minicoord.bench.task_sync import Barrier


def test_round_tags_round_trip() -> None:
    assert round_step("e2e rate=100", 0) == "e2e rate=100"
    assert round_step("heartbeat", 3) == "heartbeat #3"
    assert split_round("heartbeat #3") == ("heartbeat", 3)
    assert split_round("e2e rate=100") == ("e2e rate=100", 0)
    assert split_round("odd #label") == ("odd #label", 0)


class _FakeContext:
    """allGather of two tasks: this one and a peer whose answers we script."""

    def __init__(self, peer_lag: float) -> None:
        self.peer_lag = peer_lag
        self.sent: list[str] = []

    def allGather(self, message: str) -> list[str]:  # Spark's name
        self.sent.append(message)
        _, _, body = message.split("|", 2)
        return [message, f"{time.time()!r}|{self.peer_lag!r}|{body}"]


async def test_common_start_leaves_room_for_the_worst_lag_any_task_reported() -> None:
    barrier = Barrier(1)
    fake = _FakeContext(peer_lag=0.0)
    barrier._ctx = fake
    # Before any task saw a gather, the lag is Spark's usual one.
    assert barrier.lead() == pytest.approx(
        task_sync.FIRST_GATHER_LAG_S * task_sync.LAG_MARGIN + task_sync.START_LEAD_S / 2
    )
    assert await barrier.gather("x") == ["x", "x"]
    fake.peer_lag = 0.9
    await barrier.gather("y")
    assert barrier.lead() == pytest.approx(0.9 * task_sync.LAG_MARGIN + task_sync.START_LEAD_S / 2)
    fake.peer_lag = 0.01  # a small lag never brings the lead under the minimum
    await barrier.gather("z")
    assert barrier.lead() == task_sync.START_LEAD_S
    # Messages with the separator in them come back whole.
    assert await barrier.gather("a|b") == ["a|b", "a|b"]
    assert all(m.count("|") >= 2 for m in fake.sent)


def _options(*argv: str) -> dict[str, Any]:
    return options(build_parser().parse_args([*argv, "--out", "/tmp/unused"]))


def test_head_to_head_defaults_and_plan() -> None:
    o = _options("head-to-head", "--compare-bootstrap", "127.0.0.1:1")
    assert (o["members"], o["group_size"], o["join_members"], o["compare_rounds"]) == (
        100,
        100,
        1000,
        3,
    )
    steady, join = plan_jobs(o, 2, "p")
    assert steady.label == "steady" and not steady.scenario
    # Its own topic: a peer's topic of the default name may have other partitions.
    assert steady.topic == ("bench-steady-100", 100) and steady.params["topic"] == steady.topic[0]
    assert sum(len(w[0][1]) for w in steady.waves) == 100
    assert join.scenario == "cold-join" and join.topic == ("bench-1000", 1000)
    assert sum(len(w[0][1]) for w in join.waves) == 1000
    assert {g for w in join.waves for g, _, _ in w[0][1]} == {"p-join-g0"}


def test_data_plan_and_byte_counts() -> None:
    o = _options("data", "--fill-bytes", "1GiB", "--rates", "100,2000")
    assert o["partitions"] == 16 and o["record_bytes"] == 1024 and o["compare_rounds"] == 1
    jobs = plan_jobs(o, 3, "p")
    assert [j.label for j in jobs] == [
        "fill",
        "produce",
        "consume",
        "e2e rate=100",
        "e2e rate=2000",
    ]
    fill, produce, consume = jobs[:3]
    assert fill.params["step_records"] * 1024 == 1024**3
    # consume reads what produce wrote, with a group of its own.
    assert consume.params["data_topic"] == produce.params["data_topic"] == produce.topic[0]
    assert consume.topic == (produce.topic[0], 16) and consume.params["data_group"]
    assert all(len(j.waves) == 3 for j in jobs)
    assert _options("data", "--fill-bytes", "50MB")["fill_bytes"] == 50_000_000
    assert [j.label for j in plan_jobs(_options("data", "--no-back-to-back"), 2, "p")] == [
        "e2e rate=10000"
    ]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["data", "--fill-bytes", "lots"])


def _op(target: str, step: str, op: str, rate: float, p99: float) -> dict[str, Any]:
    return {
        "target": target,
        "step": step,
        "kind": "request",
        "op": op,
        "rate_per_s": rate,
        "ok_per_s": rate,  # every answer error-free
        "p99_ms": p99,
    }


def test_head_to_head_table_and_medians_of_per_round_ratios() -> None:
    ops = [
        _op("minicoord", "heartbeat #1", "Heartbeat", 100.0, 2.0),
        _op("other", "heartbeat #1", "Heartbeat", 50.0, 1.0),
        _op("minicoord", "heartbeat #2", "Heartbeat", 90.0, 2.0),
        _op("other", "heartbeat #2", "Heartbeat", 100.0, 4.0),
        _op("minicoord", "heartbeat #3", "Heartbeat", 120.0, 3.0),
        _op("other", "heartbeat #3", "Heartbeat", 100.0, 3.0),
    ]
    groups = [
        {"target": "minicoord", "step": "join #1", "time_to_stable_max_ms": 600.0},
        {"target": "other", "step": "join #1", "time_to_stable_max_ms": 400.0},
    ]
    table = head_to_head(ops, groups)
    beats = [r for r in table if r["measure"] == "Heartbeats/s"]
    assert [r["round"] for r in beats] == [1, 2, 3, "median"]
    assert [r["ratio"] for r in beats] == [2.0, 0.9, 1.2, 1.2]
    assert beats[-1]["minicoord"] == 100.0 and beats[-1]["other"] == 100.0
    (join, join_median) = [r for r in table if r["measure"].startswith("join")]
    assert join["ratio"] == 1.5 and join["better"] == "lower" and join_median["ratio"] == 1.5
    # Rounds that a target missed have no ratio and leave the median alone.
    assert not [r for r in table if r["measure"] == "OffsetCommits/s"]

    rows = [
        {"versus": "other", "step": f"heartbeat #{i}", "op": "Heartbeat", "rate_ratio": r}
        for i, r in ((1, 2.0), (2, 0.9), (3, 1.2))
    ] + [{"versus": "other", "step": "no rounds", "op": "Heartbeat", "rate_ratio": 9.0}]
    (median,) = round_medians(rows, ["rate_ratio"])
    assert median == {
        "versus": "other",
        "step": "heartbeat",
        "op": "Heartbeat",
        "rounds": 3,
        "rate_ratio_median": 1.2,
        "rate_ratio_min": 0.9,
        "rate_ratio_max": 2.0,
    }
