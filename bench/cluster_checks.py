"""Checks before the first barrier stage: enough task slots, and executors whose Python can
import what the tasks import.

Without them a run on a cluster fails in ways that name neither cause: a barrier stage that
needs more slots than the cluster offers waits while Spark retries its slot check (minutes,
with Spark's warning hidden), and a module missing on the executors surfaces as a failed
barrier stage deep in a Java stack trace.

The probe function runs inside the executors' Python workers and is pickled by reference to
this module, so this module imports nothing beyond the standard library at module level.
"""

from __future__ import annotations

import functools
import importlib
import platform
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

# What a task imports (minicoord's client code and kafka-python, transitively).
TASK_MODULE = "minicoord.bench.tasks"
SLOT_POLL_S = 0.25
PROBE_TIMEOUT_S = 120.0
CANCEL_GRACE_S = 10.0


class ClusterNotReady(RuntimeError):
    """The cluster cannot run the bench as asked; the message says why and what to do."""


class ProbeResult(NamedTuple):
    host: str
    executable: str
    version: str
    missing: str  # "" when TASK_MODULE imports; else "module: the ImportError"
    uvloop: bool


# -- task slots ----------------------------------------------------------------------------


def task_slots(sc: Any) -> int | None:
    """Tasks the application can run at once right now, or None when Spark cannot say.

    SparkContext.maxNumConcurrentTasks is Spark-internal (private[spark], public in the
    bytecode), and it is the very number the DAGScheduler compares a barrier stage with, so
    the check here and Spark's own cannot disagree."""
    from py4j.protocol import Py4JError

    try:
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Py4JError:
        return None


def executor_count(sc: Any) -> int:
    from py4j.protocol import Py4JError

    try:
        return int(sc._jsc.sc().getExecutorIds().size())
    except Py4JError:
        return -1


def wait_for_slots(sc: Any, tasks: int, timeout_s: float, log: Callable[[str], None]) -> int:
    """Wait until the application has `tasks` task slots (executors register a few seconds
    after the application does); raise ClusterNotReady when it has not after `timeout_s`."""
    started = time.monotonic()
    slots = task_slots(sc)
    if slots is None:
        log("this Spark version does not tell its task slots: not checked against --tasks")
        return tasks
    waiting = False
    for _ in range(int(timeout_s / SLOT_POLL_S) + 2):
        if slots >= tasks:
            if waiting:
                log(f"{slots} task slots after {time.monotonic() - started:.0f} s")
            return slots
        if time.monotonic() - started >= timeout_s:
            break
        if not waiting:
            log(
                f"waiting up to {timeout_s:.0f} s for {tasks} task slots "
                f"(the executors registered so far offer {slots})"
            )
            waiting = True
        time.sleep(SLOT_POLL_S)
        slots = task_slots(sc) or 0
    needs = (
        f"--tasks {tasks} needs {tasks} free task slots at once (a barrier stage starts all "
        "its tasks together)"
    )
    if sc.master.startswith("local"):
        raise ClusterNotReady(
            f"{needs}, but Spark {sc.master} runs {slots} at once. Lower --tasks to "
            f"{max(slots, 1)} or less, or give local mode more (--master 'local[N]')."
        )
    raise ClusterNotReady(
        f"{needs}, but after {time.monotonic() - started:.0f} s the cluster offers this "
        f"application {slots} ({executor_count(sc)} executor(s); slots = executor cores / "
        f"spark.task.cpus). Lower --tasks to {max(slots, 1)} or less, or give the "
        "application more cores (more workers, spark.cores.max, spark.executor.cores); "
        "--slots-timeout-s waits longer for executors to register."
    )


# -- the executors' Python -----------------------------------------------------------------


def probe_python(_: Iterable[Any], extra: tuple[str, ...] = ()) -> Iterator[ProbeResult]:
    """Runs in an executor's Python worker: which interpreter, and what it cannot import of
    the tasks' code and of `extra` (modules a scenario imports only when it runs)."""
    missing = ""
    for module in (TASK_MODULE, *extra):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing = f"{exc.name or module}: {exc}"
        except Exception as exc:  # a module that imports but breaks (an incompatible version)
            missing = f"{module}: {type(exc).__name__}: {exc}"
        if missing:
            break
    try:
        importlib.import_module("uvloop")
        has_uvloop = True
    except ImportError:
        has_uvloop = False
    yield ProbeResult(
        socket.gethostname(), sys.executable, platform.python_version(), missing, has_uvloop
    )


def failure_reason(exc: BaseException) -> str:
    """The part of a failed Spark job's error that says what went wrong on the executor."""
    text = str(exc)
    # A Python worker's own error: the last line of its traceback.
    python = re.findall(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$", text, re.MULTILINE)
    for name, message in reversed(python):
        if not name.startswith("Py4J"):
            return f"{name}: {message.strip()}"
    # Else the exception Spark reports for the task's last attempt (a worker that could not
    # start: "Cannot run program ...").
    lost = re.search(r"most recent failure: Lost task [^\n]*?\): ([\w.$]+): ([^\n]+)", text)
    if lost:
        return f"{lost.group(1).rsplit('.', 1)[-1]}: {lost.group(2).strip()}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first or type(exc).__name__


def probe_executors(
    sc: Any,
    partitions: int,
    log: Callable[[str], None],
    timeout_s: float = PROBE_TIMEOUT_S,
    extra: tuple[str, ...] = (),
) -> list[ProbeResult]:
    """A small non-barrier job, one task per slot so that it reaches every executor, that
    imports what the tasks import; ClusterNotReady names the interpreter and the module."""
    python = sc.pythonExec
    group = f"minicoord-bench-probe-{uuid.uuid4().hex[:8]}"
    results: list[ProbeResult] = []
    failure: list[BaseException] = []

    def job() -> None:
        sc.setJobGroup(group, "minicoord bench: the executors' Python", interruptOnCancel=True)
        try:
            probe = functools.partial(probe_python, extra=extra)
            rdd = sc.parallelize(range(partitions), partitions).mapPartitions(probe)
            results.extend(ProbeResult(*r) for r in rdd.collect())
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=job, name="bench-probe", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        sc.cancelJobGroup(group)
        worker.join(CANCEL_GRACE_S)
        raise ClusterNotReady(
            f"a probe job of {partitions} small tasks did not finish within {timeout_s:.0f} s "
            f"(executor Python: {python}); Spark's log above may say why"
        )
    if failure:
        raise ClusterNotReady(
            f"the executors could not run a Python task with PYSPARK_PYTHON={python}: "
            f"{failure_reason(failure[0])}. Point PYSPARK_PYTHON at an interpreter that "
            "exists on every worker and has minicoord[bench] installed."
        )
    broken = [r for r in results if r.missing]
    if broken:
        r = broken[0]
        module = r.missing.split(":", 1)[0]
        raise ClusterNotReady(
            f"the executors' Python {r.executable} (Python {r.version} on {r.host}) cannot "
            f"import {module!r} ({r.missing.split(': ', 1)[-1]}), which the tasks need. "
            "Install minicoord with its bench extra (pip install 'minicoord[bench]', which "
            "brings kafka-python, uvloop and confluent-kafka) into that interpreter on every "
            "worker, or point "
            "PYSPARK_PYTHON at one that has it."
        )
    for r in sorted({r for r in results if not r.uvloop}):
        log(
            f"{r.executable} on {r.host} has no uvloop: its tasks run on asyncio's default "
            "loop, which drives fewer requests per second"
        )
    return results
