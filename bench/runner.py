"""The driver of `minicoord bench`: targets, Spark jobs, raw Parquet, then the report.

For each target (minicoord; with --compare also the echo ceiling and another server) the
scenario is cut into one barrier stage per job: every task of the stage runs an event loop
driving its share of the members (bench/tasks.py), and the rows come back as a DataFrame
that is appended to the raw Parquet. All aggregation then runs in Spark over that Parquet
(bench/report.py), so a run on a cluster aggregates where the data is.

Before any server starts, the cluster is checked (bench/cluster_checks.py): enough task slots
for a barrier stage of --tasks, and executors whose Python imports what the tasks import.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minicoord.bench.cluster_checks import probe_executors, wait_for_slots
from minicoord.bench.console import PREFIX, Console
from minicoord.bench.progress import Counters, ProgressBoard, StallWatch
from minicoord.bench.spark_session import (
    QUIET_LOG_LEVEL,
    driver_addresses,
    is_local,
    spark_session,
)
from minicoord.bench.tasks import ROW_FIELDS, TaskPlan, run_task
from minicoord.server.process import ServerProcess

TARGET_MINICOORD = "minicoord"
TARGET_ECHO = "echo"
TARGET_OTHER = "other"

POLL_S = 0.5
# A stage whose tasks and counters have not moved for this long is stuck, or waiting for
# something only Spark's warnings name (task slots, executors): they are shown until it moves.
STUCK_S = 20.0


@dataclass
class Target:
    label: str
    bootstrap: str
    echo: bool = False
    process: ServerProcess | None = None  # set when the bench started it (then it stops it)

    @property
    def pid(self) -> int | None:
        return self.process.proc.pid if self.process is not None else None


@dataclass
class Job:
    """One barrier stage: a label, and each task's waves of (group, member, expected size)."""

    label: str
    waves: list[list[tuple[str, list[tuple[str, int, int]]]]]  # per task
    topic: tuple[str, int]  # the topic its members subscribe to, and its partitions
    params: dict[str, Any] = field(default_factory=dict)


def raise_nofile_limit() -> None:
    # Servers started from here inherit it: 10,000 members need 10,000 sockets there too.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pin(pid: int, cpus: list[int] | None) -> None:
    if cpus:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(pid, set(cpus))


# -- planning -----------------------------------------------------------------------------


def _groups(
    prefix: str, groups: int, size: int, first_index: int = 0
) -> list[tuple[str, int, int]]:
    return [
        (f"{prefix}-g{first_index + g}", (first_index + g) * size + i, size)
        for g in range(groups)
        for i in range(size)
    ]


def _population(prefix: str, members: int, group_size: int) -> list[tuple[str, int, int]]:
    """`members` split into groups of `group_size` (the last one smaller)."""
    out = []
    for start in range(0, members, group_size):
        size = min(group_size, members - start)
        g = start // group_size
        out += [(f"{prefix}-g{g}", start + i, size) for i in range(size)]
    return out


def _split(entries: list[tuple[str, int, int]], tasks: int) -> list[list[tuple[str, int, int]]]:
    """Share members out to tasks, keeping each group whole in one task when there are at
    least as many groups as tasks: a group split over processes joins from two start
    instants, and with group.initial.rebalance.delay.ms=0 that skew alone can cost it an
    extra rebalance round, which would measure the load generator, not the server."""
    groups: dict[str, list[tuple[str, int, int]]] = {}
    for entry in entries:
        groups.setdefault(entry[0], []).append(entry)
    if len(groups) >= tasks:
        shares: list[list[tuple[str, int, int]]] = [[] for _ in range(tasks)]
        for members in sorted(groups.values(), key=len, reverse=True):
            min(shares, key=len).extend(members)
        return shares
    # Fewer groups than tasks (one big group): contiguous blocks of members.
    per = -(-len(entries) // tasks) if entries else 0
    return [entries[i * per : (i + 1) * per] for i in range(tasks)]


def plan_jobs(o: dict[str, Any], tasks: int, prefix: str) -> list[Job]:
    scenario = o["scenario"]
    topic = (o["topic"], o["partitions"])
    if scenario == "cold-join":
        entries = _groups(prefix, o["groups"], o["members"])
        return [Job("cold-join", [[("cold-join", e)] for e in _split(entries, tasks)], topic)]
    if scenario == "join-scaling":
        jobs = []
        for size in o["sizes"]:
            entries = _groups(f"{prefix}-s{size}", 1, size)
            n = max(1, min(tasks, size))
            # A topic per size, with as many partitions as members (unless --partitions):
            # a group of 10 must not pay for encoding a 5,000-partition Metadata answer.
            sized = (f"{o['topic']}-{size}", o["partitions_given"] or size)
            jobs.append(
                Job(
                    f"size={size}",
                    [[(f"size={size}", e)] for e in _split(entries, n)],
                    sized,
                    {"topic": sized[0], "partitions": sized[1]},
                )
            )
        return jobs
    if scenario == "rejoin":
        entries = _groups(prefix, 1, o["members"])
        n = max(1, min(tasks, o["members"]))
        shares = [[("setup", e)] for e in _split(entries, n)]
        return [Job("rejoin", shares, topic, {"group": f"{prefix}-g0"})]
    if scenario == "churn":
        entries = _groups(prefix, o["groups"], o["members"])
        n = max(1, min(tasks, len(entries)))
        return [Job("churn", [[("churn", e)] for e in _split(entries, n)], topic)]
    if scenario in ("heartbeat", "commit"):
        entries = _population(prefix, o["members"], o["group_size"])
        n = max(1, min(tasks, len(entries)))
        return [Job(scenario, [[("setup", e)] for e in _split(entries, n)], topic)]
    if scenario == "scale":
        per_task: list[list[tuple[str, list[tuple[str, int, int]]]]] = [[] for _ in range(tasks)]
        done = 0
        for total in o["steps"]:
            # Each wave adds new groups, so existing groups stay Stable while it joins.
            wave = _population(f"{prefix}-w{total}", total - done, o["group_size"])
            wave = [(g, done + i, size) for g, i, size in wave]
            for t, share in enumerate(_split(wave, tasks)):
                per_task[t].append((f"members={total}", share))
            done = total
        return [Job("scale", per_task, topic)]
    raise ValueError(f"unknown scenario {scenario!r}")


# -- targets ------------------------------------------------------------------------------


def start_targets(o: dict[str, Any], log: Callable[[str], None]) -> list[Target]:
    from minicoord.server.process import start_server_process

    targets: list[Target] = []
    if o["bootstrap"]:
        targets.append(Target(TARGET_MINICOORD, o["bootstrap"], process=None))
    else:
        data_dir = o.get("server_data_dir")
        if data_dir is None and o["scenario"] == "commit":
            # Commits are about durability: write a real log (the flush policy applies).
            data_dir = str(Path(o["out"]) / "server-data")
        server = start_server_process(
            o["server_config"], data_dir=data_dir, extra_args=["--log-level", "WARNING"]
        )
        pin(server.proc.pid, o["server_cpus"])
        log(f"started minicoord at {server.bootstrap} (pid {server.proc.pid})")
        targets.append(Target(TARGET_MINICOORD, server.bootstrap, process=server))
    if o["compare"]:
        if o["scenario"] == "heartbeat":
            from minicoord.bench.echo_server import start_echo_process

            echo = start_echo_process()
            pin(echo.proc.pid, o["server_cpus"])
            log(f"started the echo server at {echo.bootstrap} (pid {echo.proc.pid})")
            targets.append(Target(TARGET_ECHO, echo.bootstrap, echo=True, process=echo))
        else:
            log("the echo ceiling answers only Heartbeats: it is compared in `heartbeat` only")
    if o["compare_bootstrap"]:
        targets.append(Target(TARGET_OTHER, o["compare_bootstrap"]))
    return targets


def prepare_topic(target: Target, topic: str, partitions: int) -> None:
    if target.echo:
        return
    from minicoord.clients.connection import ProtocolClient
    from minicoord.clients.member_base import create_topic

    async def create() -> int:
        host, _, port = target.bootstrap.rpartition(":")
        async with await ProtocolClient.connect(host.strip("[]"), int(port), "bench-admin") as c:
            return await create_topic(c, topic, partitions)

    error = asyncio.run(create())
    if error:
        raise RuntimeError(f"cannot create topic {topic} on {target.bootstrap}: error {error}")


# -- Spark --------------------------------------------------------------------------------


def schema() -> Any:
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    types = {
        "task": IntegerType(),
        "member": IntegerType(),
        "group_size": IntegerType(),
        "generation": IntegerType(),
        "error": IntegerType(),
        "start": DoubleType(),
        "end": DoubleType(),
        "latency_ms": DoubleType(),
        "value": DoubleType(),
    }
    return StructType([StructField(n, types.get(n, StringType()), False) for n in ROW_FIELDS])


def describe(label: str, tasks_done: int, tasks: int, members: int, c: Counters) -> str:
    """The progress line of one stage: tasks, members started and settled, requests."""
    done = max(tasks_done, c.finished)
    running = max(0, min(c.tasks - c.finished, tasks - done))
    text = f"{label}: tasks {running} running, {done}/{tasks} done"
    if c.members or members:
        text += f", {c.started}/{max(members, c.members)} members started, {c.settled} settled"
    if c.failed:
        text += f", {c.failed} failed"
    return text + f", {c.requests:,} requests"


def run_job(
    spark: Any,
    plans: list[TaskPlan],
    raw: str,
    progress: Any,
    board: ProgressBoard,
    log: Callable[[str], None],
    label: str,
) -> None:
    """Run one barrier stage; append its rows to the raw Parquet. Blocks; shows progress."""
    sc = spark.sparkContext
    sc.setJobDescription(label)
    rdd = sc.parallelize(plans, len(plans)).barrier().mapPartitions(run_task)
    frame = spark.createDataFrame(rdd, schema(), verifySchema=False)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            frame.write.mode("append").parquet(raw)
        except BaseException as exc:
            failure.append(exc)

    members = sum(len(entries) for plan in plans for _, entries in plan.waves)
    worker = threading.Thread(target=write, name=f"bench-{label}", daemon=True)
    started = time.monotonic()
    worker.start()
    tracker = sc.statusTracker()
    watch = StallWatch(STUCK_S, started)
    while worker.is_alive():
        worker.join(POLL_S)
        done = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done = max(done, info.numCompletedTasks)
        counters = board.totals(plans[0].job)
        now = time.monotonic()
        stall = watch.observe((done, counters), now)
        if stall is True:
            sc.setLogLevel("WARN")
            log(
                f"{label}: nothing moved for {STUCK_S:.0f} s; Spark's warnings are shown "
                "until it does"
            )
        elif stall is False:
            sc.setLogLevel(QUIET_LOG_LEVEL)
        text = describe(label, done, len(plans), members, counters)
        progress.set_postfix_str(f"{text}, {now - started:.0f}s")
    if watch.stalled:
        sc.setLogLevel(QUIET_LOG_LEVEL)
    if not failure:
        # Once more: each task sent its final counters as it ended, after the last poll.
        counters = board.totals(plans[0].job)
        text = describe(label, len(plans), len(plans), members, counters)
        progress.set_postfix_str(f"{text}, {time.monotonic() - started:.0f}s", refresh=False)
    progress.update(1)
    if failure:
        raise failure[0]


# -- the whole run ------------------------------------------------------------------------


def check_cluster(spark: Any, o: dict[str, Any], log: Callable[[str], None]) -> int:
    """How many tasks each stage runs, once the cluster is known to run that many barrier
    tasks whose imports work on the executors (else ClusterNotReady)."""
    sc = spark.sparkContext
    local = is_local(sc.master)
    # Local mode has all its slots from the start: no executor is on its way.
    timeout = 0.0 if local else float(o["slots_timeout_s"])
    tasks = o["tasks"]
    if tasks is None and local:
        tasks = sc.defaultParallelism
    elif tasks is None:
        # defaultParallelism counts only the executors registered so far (and is at least
        # 2): on a cluster, take every slot there is once the first executor is in.
        tasks = wait_for_slots(sc, 1, timeout, log)
        log(f"--tasks not given: {tasks}, the task slots the cluster offers now")
    slots = wait_for_slots(sc, tasks, timeout, log)
    # Local workers run this very interpreter, which has imported the tasks' code already.
    if not local or sc.pythonExec != sys.executable:
        probe_executors(sc, slots, log)
    return tasks


def run(o: dict[str, Any], console: Console | None = None) -> dict[str, Any]:
    from minicoord.bench import report
    from tqdm import tqdm

    console = console or Console()
    out = Path(o["out"])
    out.mkdir(parents=True, exist_ok=True)
    raw = str((out / "raw.parquet").resolve())
    raise_nofile_limit()

    def log(message: str) -> None:
        tqdm.write(f"{PREFIX}{message}", file=console)  # type: ignore[arg-type]

    from pyspark.sql import SparkSession

    # A session that already exists (a notebook, a test) is the caller's: used, not stopped.
    owns_session = SparkSession.getActiveSession() is None
    targets: list[Target] = []
    spark = None
    try:
        spark = spark_session(o)
        console.attach(spark)
        # Checked before any server starts: a cluster that cannot run the stages fails fast.
        tasks = check_cluster(spark, o, log)
        targets = start_targets(o, log)
        run_id = uuid.uuid4().hex[:6]
        all_jobs = {
            t.label: plan_jobs(o, tasks, f"{o['scenario']}-{run_id}-{t.label}") for t in targets
        }
        total = sum(len(j) for j in all_jobs.values())
        bind, advertised = driver_addresses(spark)
        with (
            ProgressBoard(bind) as board,
            tqdm(
                total=total,
                desc=o["scenario"],
                unit="job",
                file=console,  # type: ignore[arg-type]
                disable=o["no_progress"],
            ) as progress,
        ):
            if board.error is not None:
                log(f"no live member counts: cannot listen on {bind} ({board.error})")
            for target in targets:
                for n, job in enumerate(all_jobs[target.label]):
                    prepare_topic(target, *job.topic)
                    params = {**o, **job.params}
                    plans = [
                        TaskPlan(
                            o["scenario"],
                            target.label,
                            target.bootstrap,
                            i,
                            len(job.waves),
                            waves,
                            params,
                            target.echo,
                            target.pid,
                            progress=(advertised, board.address[1]) if board.address else None,
                            job=f"{run_id}-{target.label}-{n}",
                        )
                        for i, waves in enumerate(job.waves)
                    ]
                    label = f"{target.label} {job.label}"
                    run_job(spark, plans, raw, progress, board, log, label)
        meta = {
            "scenario": o["scenario"],
            # What a group's assignment must cover, per step (verification in the report).
            "partitions_by_step": {
                job.label: job.topic[1] for job in next(iter(all_jobs.values()), [])
            },
            "targets": {t.label: t.bootstrap for t in targets},
            "tasks": tasks,
            "master": spark.sparkContext.master,
            "parameters": {k: v for k, v in o.items() if k not in ("out",)},
            "started_server_pids": {t.label: t.pid for t in targets if t.pid},
        }
        return report.build(spark, raw, out, meta)
    finally:
        if spark is not None and owns_session:
            spark.stop()
        for t in targets:
            if t.process is not None:
                t.process.stop()
