"""`minicoord bench` on a real Spark standalone cluster: a master and two 1-core workers on
loopback (sparkkit.py), started once for the module and stopped by PID at its end.

The bench's driver runs in this process (`main([... "--master", "spark://…"])`, what
`minicoord bench` calls) or under spark-submit, as the README's "On a Spark cluster"
section shows by hand. Executors run this interpreter (PYSPARK_PYTHON), except where a test
gives them one without the tasks' modules.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import minicoord.bench.cli
import pytest
from minicoord.bench.cli import main
from sparkkit import LOOPBACK, SPARK_SUBMIT, StandaloneCluster

CLUSTER_START_S = 90.0
SUBMIT_TIMEOUT_S = 150.0
# The driver on loopback; small executors (the workers offer 1 GiB each).
DRIVER_CONF = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.ui.enabled": "false",
    "spark.executor.memory": "512m",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    spark = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        spark.start(workers=2, cores=1, timeout=CLUSTER_START_S)
        yield spark
    finally:
        spark.stop()
    assert not spark.leftovers(), "processes left in the cluster daemons' groups"


def in_process_driver(
    monkeypatch: pytest.MonkeyPatch, cluster: StandaloneCluster, python: str, out: Path
) -> list[str]:
    """Environment and options of a bench driver in this process; its extra argv."""
    for key in ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_LOCAL_IP", "SPARK_LOCAL_DIRS"):
        monkeypatch.setenv(key, cluster.env[key])
    monkeypatch.setenv("PYSPARK_PYTHON", python)
    argv = ["--master", cluster.url, "--out", str(out), "--timeout-s", "60"]
    for key, value in {**DRIVER_CONF, "spark.local.dir": str(out.parent / "driver")}.items():
        argv += ["--spark-conf", f"{key}={value}"]
    return argv


def read_rows(path: Path) -> list[Any]:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        return spark.read.parquet(str(path)).collect()
    finally:
        spark.stop()


def op(summary: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [o for o in summary["operations"] if o["op"] == name]
    return found


@pytest.mark.timeout(300)
def test_cold_join_runs_on_both_executors(
    cluster: StandaloneCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "cold"
    argv = ["cold-join", "--groups", "4", "--members", "3", "--tasks", "2"]
    # Members start over 1.5 s, so the progress line is read while the tasks run; they
    # learn of the rebalances this causes from heartbeats every 0.5 s.
    argv += ["--start-spread-ms", "1500", "--heartbeat-interval-ms", "500"]
    argv += ["--slots-timeout-s", "60"]
    argv += in_process_driver(monkeypatch, cluster, sys.executable, out)
    assert main(argv) == 0
    err = capfd.readouterr().err

    rows = read_rows(out / "raw.parquet")
    task_executor = {(r["task"], r["executor"]) for r in rows}
    executors = {e for _, e in task_executor}
    # Two tasks on two 1-core executors: one each, told apart by host:port.
    assert sorted(t for t, _ in task_executor) == [0, 1] and len(executors) == 2, task_executor
    for executor in executors:
        host, _, port = executor.rpartition(":")
        assert host == LOOPBACK and int(port) > 0, executor
    # Groups stay whole in one task: each executor drove 2 groups of 3 members.
    requests = Counter((r["executor"], r["op"]) for r in rows if r["kind"] == "request")
    for executor in executors:
        assert requests[(executor, "FindCoordinator")] == 6
        assert requests[(executor, "LeaveGroup")] == 6
        assert requests[(executor, "JoinGroup")] >= 12
    assert not [r for r in rows if r["kind"] == "phase" and r["error"] != 0]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["master"] == cluster.url and summary["tasks"] == 2
    assert sorted((e["executor"], e["tasks"]) for e in summary["executors"]) == sorted(
        (e, [t]) for t, e in task_executor
    )
    assert op(summary, "cold_join")["count"] == 12 and op(summary, "cold_join")["errors"] == 0
    assert op(summary, "FindCoordinator")["count"] == 12
    (groups,) = summary["results"]["groups"]
    assert groups["groups"] == 4 and groups["assignment_disjoint_and_complete"] == 4
    assert groups["assignment_violations"] == 0 and groups["groups_with_failures"] == 0

    # Progress counted members and requests while the tasks ran, not only finished tasks...
    assert re.search(r"tasks [12] running, [01]/2 done, \d+/12 members started", err), err[-2000:]
    # ...and its last line has every member settled and every request the rows hold.
    final = re.findall(r"2/2 done, 12/12 members started, 12 settled, ([\d,]+) requests", err)
    assert final and int(final[-1].replace(",", "")) == sum(requests.values()), err[-2000:]


def run_bounded(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run a command in a session of its own; on timeout kill that whole group (the JVM and
    the Python driver it started) and fail."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=30)
        raise AssertionError(f"{cmd[0]} ran over {timeout} s:\n{stderr[-3000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


@pytest.mark.timeout(300)
def test_too_many_tasks_fail_fast_under_spark_submit(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    out = tmp_path / "three"
    cmd = [str(SPARK_SUBMIT), "--master", cluster.url]
    for key, value in DRIVER_CONF.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [minicoord.bench.cli.__file__, "cold-join", "--groups", "3", "--members", "2"]
    cmd += ["--tasks", "3", "--slots-timeout-s", "3", "--out", str(out)]
    env = {**cluster.env, "PYSPARK_PYTHON": sys.executable}

    started = time.monotonic()
    done = run_bounded(cmd, env, SUBMIT_TIMEOUT_S)
    elapsed = time.monotonic() - started

    assert done.returncode == 2, done.stderr[-3000:]
    assert "minicoord bench: waiting up to 3 s for 3 task slots" in done.stderr
    assert "--tasks 3 needs 3 free task slots" in done.stderr, done.stderr[-3000:]
    assert "offers this application 2 (2 executor(s)" in done.stderr
    assert "Lower --tasks to 2 or less" in done.stderr
    # spark-submit merges its Python driver's stderr into stdout: the bench writes its
    # lines to the JVM's stderr so that they stay off stdout.
    assert "minicoord bench:" not in done.stdout, done.stdout[-3000:]
    # Nothing was submitted (Spark would retry its slot check for half a minute).
    assert not (out / "raw.parquet").exists()
    assert elapsed < 60, elapsed


@pytest.mark.timeout(300)
def test_executor_python_without_the_task_modules_is_named(
    cluster: StandaloneCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # An interpreter of the same Python without any installed package (no kafka-python).
    bare = tmp_path / "bare"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=60
    )
    python = str(bare / "bin" / "python")
    out = tmp_path / "bare-run"
    argv = ["cold-join", "--groups", "2", "--members", "2", "--tasks", "2"]
    argv += in_process_driver(monkeypatch, cluster, python, out)

    assert main(argv) == 2
    err = capfd.readouterr().err
    assert f"the executors' Python {python} (Python " in err, err[-3000:]
    assert "cannot import 'kafka' (No module named 'kafka')" in err
    assert "PYSPARK_PYTHON" in err
    assert not (out / "raw.parquet").exists()
