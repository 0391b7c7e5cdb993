"""The driver of `minicoord bench`: targets, Spark jobs, raw Parquet, then the report.

For each target (minicoord; with --compare also the echo ceiling and another server,
bench/targets.py) the scenario is cut into one barrier stage per job (bench/planning.py):
every task of the stage runs an event loop driving its share of the load (bench/tasks.py),
and the rows come back as a DataFrame that is appended to the raw Parquet. With
--compare-rounds R every target's jobs run R times, the targets taking turns round by round,
so that drift of a shared machine hits each alike. All aggregation then runs in Spark over
that Parquet (bench/report.py), so a run on a cluster aggregates where the data is.

Before any server starts, the cluster is checked (bench/cluster_checks.py): enough task slots
for a barrier stage of --tasks, and executors whose Python imports what the tasks import.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minicoord.bench.cluster_checks import ClusterNotReady, probe_executors, wait_for_slots
from minicoord.bench.console import PREFIX, Console
from minicoord.bench.planning import Job, plan_jobs
from minicoord.bench.progress import Counters, ProgressBoard, StallWatch
from minicoord.bench.spark_session import (
    QUIET_LOG_LEVEL,
    driver_addresses,
    is_local,
    spark_session,
)
from minicoord.bench.targets import (
    Target,
    prepare_topic,
    raise_nofile_limit,
    start_targets,
)
from minicoord.bench.task_run import round_step
from minicoord.bench.tasks import ROW_FIELDS, TaskPlan, run_task

POLL_S = 0.5
# A stage whose tasks and counters have not moved for this long is stuck, or waiting for
# something only Spark's warnings name (task slots, executors): they are shown until it moves.
STUCK_S = 20.0


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


def describe(
    label: str, tasks_done: int, tasks: int, members: int, c: Counters, unit: str = "requests"
) -> str:
    """The progress line of one stage: tasks, members started and settled, requests (or
    records, in the data scenario)."""
    done = max(tasks_done, c.finished)
    running = max(0, min(c.tasks - c.finished, tasks - done))
    text = f"{label}: tasks {running} running, {done}/{tasks} done"
    if c.members or members:
        text += f", {c.started}/{max(members, c.members)} members started, {c.settled} settled"
    if c.failed:
        text += f", {c.failed} failed"
    return text + f", {c.requests:,} {unit}"


def run_job(
    spark: Any,
    plans: list[TaskPlan],
    raw: str,
    progress: Any,
    board: ProgressBoard,
    log: Callable[[str], None],
    label: str,
    unit: str = "requests",
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
        text = describe(label, done, len(plans), members, counters, unit)
        progress.set_postfix_str(f"{text}, {now - started:.0f}s")
    if watch.stalled:
        sc.setLogLevel(QUIET_LOG_LEVEL)
    if not failure:
        # Once more: each task sent its final counters as it ended, after the last poll.
        counters = board.totals(plans[0].job)
        text = describe(label, len(plans), len(plans), members, counters, unit)
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
        # The data scenario's clients are imported only when its steps run.
        extra = ("confluent_kafka",) if o["scenario"] == "data" else ()
        probe_executors(sc, slots, log, extra=extra)
    return tasks


def check_plan(o: dict[str, Any], tasks: int) -> None:
    """What the scenario needs of --tasks, known only once the cluster said how many."""
    if o["scenario"] == "data" and o["partitions"] < tasks:
        # Each task's consumer must hold a partition for the group to count as settled.
        raise ClusterNotReady(
            f"the data scenario runs one consumer per task: --partitions {o['partitions']} "
            f"leaves some of --tasks {tasks} without a partition; give at least {tasks}"
        )


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
        check_plan(o, tasks)
        targets = start_targets(o, log)
        run_id = uuid.uuid4().hex[:6]
        rounds = max(1, int(o.get("compare_rounds") or 1))
        # In order: round by round, within a round target by target (minicoord, other, ...).
        schedule: list[tuple[int, Target, Job]] = []
        for r in range(1, rounds + 1):
            for t in targets:
                prefix = f"{o['scenario']}-{run_id}-{t.label}" + (f"-r{r}" if rounds > 1 else "")
                schedule += [
                    (r if rounds > 1 else 0, t, job)
                    for job in plan_jobs(o, tasks, prefix, r if rounds > 1 else 0)
                ]
        total = len(schedule)
        bind, advertised = driver_addresses(spark)
        existing: dict[tuple[str, str], int] = {}  # (target, topic): its partitions
        partitions_by_step: dict[str, dict[str, int]] = {t.label: {} for t in targets}
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
            for n, (round_, target, job) in enumerate(schedule):
                partitions = prepare_topic(target, *job.topic)
                if partitions != job.topic[1] and (target.label, job.topic[0]) not in existing:
                    log(
                        f"topic {job.topic[0]} already existed on {target.label} "
                        f"({target.bootstrap}) with {partitions} partitions, not "
                        f"{job.topic[1]}: its members are assigned {partitions}, and checked "
                        "against that"
                    )
                existing[(target.label, job.topic[0])] = partitions
                # What each group's assignment must cover (verified in the report), and what
                # consumer-protocol members wait to see owned: the topic as it is.
                for waves in job.waves[:1]:
                    for step, _ in waves:
                        partitions_by_step[target.label][round_step(step, round_)] = partitions
                params = {**o, **job.params, "round": round_, "partitions": partitions}
                plans = [
                    TaskPlan(
                        job.scenario or o["scenario"],
                        target.label,
                        target.bootstrap,
                        i,
                        len(job.waves),
                        waves,
                        params,
                        target.echo,
                        target.pid,
                        progress=(advertised, board.address[1]) if board.address else None,
                        job=f"{run_id}-{n}",
                    )
                    for i, waves in enumerate(job.waves)
                ]
                label = f"{target.label} {round_step(job.label, round_)}"
                unit = "records" if o["scenario"] == "data" else "requests"
                run_job(spark, plans, raw, progress, board, log, label, unit)
        meta = {
            "scenario": o["scenario"],
            # What a group's assignment must cover, per target and step.
            "partitions_by_step": partitions_by_step,
            "rounds": rounds,
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
            if t.stop(out):
                log(f"{t.label} logged warnings or errors: see {out / (t.label + '-server.log')}")
