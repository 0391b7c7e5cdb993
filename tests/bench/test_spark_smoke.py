"""`minicoord bench` end to end through Spark local mode, at toy sizes.

One Spark session (local[2]) serves the module: the bench uses it and leaves it running, so
the test can read the raw Parquet back as a DataFrame. Each run starts its own minicoord
server (no --bootstrap), as a user's run would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from minicoord.bench.cli import main
from minicoord.server.process import ServerProcess

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def op(summary: dict[str, Any], name: str, target: str = "minicoord", step: str | None = None):
    (found,) = [
        o
        for o in summary["operations"]
        if o["op"] == name and o["target"] == target and (step is None or o["step"] == step)
    ]
    return found


def sane_latency(o: dict[str, Any]) -> None:
    assert 0 < o["p50_ms"] <= o["p95_ms"] <= o["p99_ms"] <= o["max_ms"] < 60_000, o
    assert o["rate_per_s"] and o["rate_per_s"] > 0, o


def assert_plots(out: Path) -> None:
    for name in ("latency_cdf.png", "join_vs_group_size.png", "throughput.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5_000, name


def test_cold_join_through_spark(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "cold"
    argv = ["cold-join", "--groups", "3", "--members", "2", "--tasks", "2", "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0

    df = spark.read.parquet(str(out / "raw.parquet"))
    counts = {(r["kind"], r["op"]): r["count"] for r in df.groupBy("kind", "op").count().collect()}
    # 6 members: each two JoinGroups (MEMBER_ID_REQUIRED, then the rejoin), one SyncGroup
    # (a group in one round), one FindCoordinator, one LeaveGroup; one leader per group
    # fetches Metadata.
    assert counts[("request", "FindCoordinator")] == 6
    assert counts[("request", "JoinGroup")] >= 12
    assert counts[("request", "SyncGroup")] >= 6
    assert counts[("request", "LeaveGroup")] == 6
    assert counts[("request", "Metadata")] >= 3
    assert counts[("phase", "join")] == counts[("phase", "cold_join")] == 6
    # Partitions default to the group size: 2 per group, each held by exactly one member.
    assert counts[("assignment", "bench:0")] == counts[("assignment", "bench:1")] == 3
    assert {r["task"] for r in df.select("task").distinct().collect()} == {0, 1}
    assert df.filter("kind = 'phase' and error != 0").count() == 0

    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "cold-join"
    assert summary["target"].startswith("127.0.0.1:")
    assert summary["parameters"]["groups"] == 3 and summary["parameters"]["members"] == 2
    # Local mode has one executor, the driver itself: both tasks ran there.
    (executor,) = summary["executors"]
    assert executor["tasks"] == [0, 1] and executor["executor"].rpartition(":")[2].isdigit()
    for name in ("cold_join", "join", "JoinGroup", "SyncGroup"):
        sane_latency(op(summary, name))
    assert op(summary, "cold_join")["count"] == 6
    (groups,) = summary["results"]["groups"]
    assert groups["groups"] == 3 and groups["assignment_disjoint_and_complete"] == 3
    assert groups["assignment_violations"] == 0 and groups["join_rounds_max"] >= 1
    assert 0 < groups["time_to_stable_p50_ms"] <= groups["time_to_stable_max_ms"]
    assert "| minicoord | cold-join | cold_join | 6 |" in (out / "results.md").read_text()
    assert_plots(out)


def test_heartbeat_against_minicoord_and_the_echo_ceiling(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "hb"
    argv = ["heartbeat", "--members", "20", "--group-size", "10", "--duration-s", "1"]
    argv += ["--rates", "200", "--compare", "--tasks", "2", "--out", str(out), "--no-progress"]
    assert main(argv) == 0

    df = spark.read.parquet(str(out / "raw.parquet"))
    beats = df.filter("kind = 'request' and op = 'Heartbeat' and step != 'setup'")
    by_target = {r["target"]: r["count"] for r in beats.groupBy("target").count().collect()}
    assert set(by_target) == {"minicoord", "echo"} and min(by_target.values()) > 100
    assert beats.filter("error != 0").count() == 0

    summary = json.loads((out / "summary.json").read_text())
    for target in ("minicoord", "echo"):
        sane_latency(op(summary, "Heartbeat", target, "back-to-back"))
        fixed = op(summary, "Heartbeat", target, "rate=200")
        # Paced, not back to back: far below the back-to-back rate. Only a sanity bound: a
        # loaded CI machine stretches and squeezes a one-second window (speed belongs in the
        # benchmarks, not in assertions).
        assert 0 < fixed["rate_per_s"] < 1000, fixed
    steps = summary["results"]["steps"]
    assert {(s["target"], s["step"]) for s in steps} == {
        (t, s) for t in ("minicoord", "echo") for s in ("back-to-back", "rate=200")
    }
    # The bench started both servers, so it read their CPU time.
    assert all(s["per_server_cpu_second"] for s in steps if s["step"] == "back-to-back")
    # ...and every task's own CPU, and the machine's busy cores, beside each step's rate.
    assert all(s["client_cpu_cores_all_tasks"] > 0 for s in steps)
    assert all(s["host_busy_cores"] is not None for s in steps)
    ratios = {(r["versus"], r["step"]): r for r in summary["ratios"] if r["op"] == "Heartbeat"}
    assert ratios[("echo", "back-to-back")]["rate_ratio"] > 0
    assert_plots(out)


def test_more_tasks_than_local_slots_fail_at_once(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "three"
    argv = ["cold-join", "--groups", "3", "--members", "1", "--tasks", "3", "--out", str(out)]
    # local[2] never gets a third slot: no waiting, no server, nothing submitted.
    assert main([*argv, "--no-progress"]) == 2
    err = capfd.readouterr().err
    assert "--tasks 3 needs 3 free task slots" in err
    assert "but Spark local[2] runs 2 at once" in err
    assert not (out / "raw.parquet").exists()


def test_data_against_minicoord_and_a_second_server(
    spark: Any, tmp_path: Path, server_factory: Callable[..., ServerProcess]
) -> None:
    other = server_factory()  # the compare target: another minicoord, in memory
    out = tmp_path / "data"
    argv = ["data", "--records", "3000", "--record-bytes", "200", "--fill-bytes", "100KiB"]
    argv += ["--rates", "300", "--duration-s", "1", "--partitions", "4", "--tasks", "2"]
    # A consumer that joins second learns of the rebalance from its next heartbeat.
    argv += ["--consumer-config", "heartbeat.interval.ms=200"]
    # A group settles here in seconds. Every wait a step may sit out (for a group to settle,
    # for records to arrive) is bounded by this; at the default 120 s, two of them in one run
    # outlast the test's 300 s timeout, which then says nothing of which one it was.
    argv += ["--timeout-s", "30"]
    argv += ["--compare-bootstrap", other.bootstrap, "--compare-pid", str(other.proc.pid)]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0

    summary = json.loads((out / "summary.json").read_text())
    results = summary["results"]
    steps = ("fill", "produce", "consume", "e2e rate=300")
    data = {(e["target"], e["step"]): e for e in results["data"]}
    assert set(data) == {(t, s) for t in ("minicoord", "other") for s in steps}
    assert results["records_verified"] is True
    for target in ("minicoord", "other"):
        fill, produce, consume, e2e = (data[(target, s)] for s in steps)
        # Every record produced was acknowledged, then consumed once by the group.
        assert produce["records_produced"] == consume["records_consumed"] == 3000
        assert produce["produce_failed"] == consume["consume_errors"] == 0
        assert consume["verified"] is True and e2e["verified"] is True
        assert consume["rebalances_during_step"] == e2e["rebalances_during_step"] == 0
        rate = produce["produce_records_per_s"]
        assert rate > 0 and produce["produce_mb_per_s"] == pytest.approx(rate * 200 / 1e6, 0.01)
        assert consume["consume_records_per_s"] > 0
        # 1.5 s at 300/s, warm-up included; latencies from the 1 s after it.
        assert 400 <= e2e["records_produced"] == e2e["records_consumed"] <= 460
        assert 0 < e2e["e2e_p50_ms"] <= e2e["e2e_p99_ms"] <= e2e["e2e_max_ms"] < 60_000
        assert e2e["offered_per_s"] == 300
        # One process per task; the server's CPU and memory read from /proc (started by
        # the bench, or named by --compare-pid).
        assert len(produce["client_cpu_cores_by_task"]) == 2
        assert produce["client_cpu_cores_all_tasks"] > 0 and produce["host_busy_cores"] is not None
        assert produce["server_cpu_cores"] is not None
        assert fill["fill_bytes"] >= 100 * 1024 and fill["records_produced"] == 512
        assert min(fill["server_rss_before_mib"], fill["server_rss_settled_mib"]) > 10
    ratios = {r["step"]: r for r in results["data_ratios"]}
    assert ratios["produce"]["produce_rate_ratio"] > 0
    assert ratios["consume"]["consume_rate_ratio"] > 0
    assert ratios["e2e rate=300"]["e2e_p99_ratio"] > 0
    e2e_ratio = op(summary, "e2e", "minicoord", "e2e rate=300")
    assert e2e_ratio["count"] < data[("minicoord", "e2e rate=300")]["records_consumed"]
    assert "## data_ratios" in (out / "results.md").read_text()
    # The log the bench gave its own server is gone with it.
    assert not (out / "server-data").exists()


def test_head_to_head_alternates_targets_round_by_round(
    spark: Any, tmp_path: Path, server_factory: Callable[..., ServerProcess]
) -> None:
    other = server_factory()
    out = tmp_path / "h2h"
    argv = ["head-to-head", "--members", "10", "--group-size", "5", "--join-members", "12"]
    # One task: the rounds' order is the runner's, and Spark's allGather costs none.
    argv += ["--duration-s", "0.5", "--compare-rounds", "2", "--tasks", "1"]
    argv += ["--compare-bootstrap", other.bootstrap, "--out", str(out), "--no-progress"]
    assert main(argv) == 0

    summary = json.loads((out / "summary.json").read_text())
    results = summary["results"]
    table = results["head_to_head"]
    for measure in ("Heartbeats/s", "OffsetCommits/s", "join: first JoinGroup -> all assigned, ms"):
        rows = [r for r in table if r["measure"] == measure]
        assert [r["round"] for r in rows] == [1, 2, "median"], measure
        assert all(r["ratio"] > 0 and r["minicoord"] > 0 and r["other"] > 0 for r in rows)
    assert results["offsets_verified"] is True
    joins = [g for g in results["groups"] if g["step"].startswith("join")]
    assert len(joins) == 4 and all(g["group_size"] == 12 for g in joins)
    assert all(g["assignment_violations"] == 0 for g in results["groups"])
    medians = {(m["step"], m["op"]): m for m in summary["ratio_medians"]}
    assert medians[("heartbeat", "Heartbeat")]["rounds"] == 2

    # Round by round, minicoord then the other target, never two rounds of one in a row.
    df = spark.read.parquet(str(out / "raw.parquet"))
    starts = (
        df.filter("kind = 'request' and op = 'Heartbeat' and step like 'heartbeat #%'")
        .groupBy("target", "step")
        .min("start")
        .collect()
    )
    order = [(r["target"], r["step"]) for r in sorted(starts, key=lambda r: r[2])]
    assert order == [
        ("minicoord", "heartbeat #1"),
        ("other", "heartbeat #1"),
        ("minicoord", "heartbeat #2"),
        ("other", "heartbeat #2"),
    ]
