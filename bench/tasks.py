"""What one Spark task runs: the scenario its plan names, on a fresh event loop, yielding
one row per measurement.

The scenarios live by domain: group_scenarios.py (simulated members of the coordinator
scenarios), protocol_scenarios.py (classic vs consumer protocol side by side),
data_scenario.py (stock librdkafka producers and consumers); the machinery they share
(plans, members, rows) in task_run.py, the barrier and connections in task_sync.py. This
module is the entry point Spark pickles by reference (`run_task`), and what the cluster
check imports on the executors.

Everything here is imported inside the Python workers, so it must not import pyspark at
module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from collections.abc import Awaitable, Callable, Iterator

from minicoord.bench import data_scenario
from minicoord.bench import group_scenarios as group
from minicoord.bench import protocol_scenarios as protocols
from minicoord.bench.progress import ProgressSender
from minicoord.bench.task_run import ROW_FIELDS, TaskPlan, TaskRun

__all__ = ["ROW_FIELDS", "SCENARIOS", "TaskPlan", "run_plan", "run_task"]

SCENARIOS: dict[str, Callable[[TaskRun], Awaitable[None]]] = {
    "cold-join": group.cold_join,
    "join-scaling": group.cold_join,
    "rejoin": group.rejoin,
    "churn": group.churn,
    "heartbeat": group.heartbeat,
    "commit": group.commit,
    "scale": group.scale,
    "head-to-head": group.head_to_head,
    # `protocols` runs these and cold-join, one job per protocol (planning.protocol_jobs).
    "newcomer": protocols.newcomer,
    "protocol-heartbeat": protocols.protocol_heartbeat,
    "data": data_scenario.data,
}


def _prepare_process(plan: TaskPlan) -> None:
    # Thousands of members each hold a socket: lift the soft descriptor limit to the hard one.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cpus = plan.params.get("client_cpus")
    if cpus:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, set(cpus))


async def run_plan(plan: TaskPlan) -> list[tuple]:
    """Run one plan in the running loop; the rows it measured."""
    run = TaskRun(plan)
    sender = ProgressSender(plan.progress, plan.job, plan.task)
    reporting = asyncio.ensure_future(sender.run(run.counters))
    try:
        await SCENARIOS[plan.scenario](run)
    finally:
        reporting.cancel()
        await asyncio.gather(reporting, return_exceptions=True)
        await run.close()
        sender.send(run.counters(finished=True))  # whatever the last tick showed
        sender.close()
    # Whatever was recorded after the last emit (a failure mid-way) is kept too.
    run.emit("unfinished")
    return run.out


def run_task(plans: Iterator[TaskPlan]) -> Iterator[tuple]:
    """Spark mapPartitions entry point: each partition holds exactly one plan."""
    for plan in plans:
        _prepare_process(plan)
        try:
            import uvloop
        except ImportError:
            rows = asyncio.run(run_plan(plan))
        else:
            rows = uvloop.run(run_plan(plan))
        yield from rows
