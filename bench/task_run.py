"""The machinery every Spark task of the bench shares: its plan, the members of the
coordinator scenarios (of either group protocol: protocol_members.py, settling.py), CPU
windows, and the output rows. The barrier that lines the tasks of a stage up and the
connection pool are in task_sync.py.

The driver (`minicoord.bench.runner`) cuts a scenario into `TaskPlan`s, one per task of a
barrier stage; `minicoord.bench.tasks.run_task` runs a plan on a fresh uvloop loop with a
`TaskRun`, and a scenario function (group_scenarios.py, data_scenario.py, ...) drives it.
Tasks agree on a common start (and on every later phase of a scenario) through Spark's
`BarrierTaskContext.allGather`, run in a thread so that heartbeats go on while a task waits
for the others. Without Spark (tests, a single process) the same code runs with a one-task
barrier.

Everything here is imported inside the Python workers, so it must not import pyspark at
module level.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minicoord.bench.proc_stats import cpu_seconds, host_busy_seconds, rss_kib
from minicoord.bench.progress import Counters
from minicoord.bench.protocol_members import CLASSIC, CONSUMER, make_member
from minicoord.bench.settling import Describer, Settling
from minicoord.bench.task_sync import Barrier, ConnectionPool
from minicoord.clients.member_base import MemberError
from minicoord.clients.timings import KIND_ASSIGNMENT, KIND_GAUGE, Recorder

# Row layout of every measurement, as the DataFrame schema in runner.py names it.
ROW_FIELDS = (
    "target",
    "step",
    "task",
    "executor",
    "kind",
    "op",
    "group_id",
    "member",
    "group_size",
    "generation",
    "start",
    "end",
    "latency_ms",
    "error",
    "value",
)

ROUND_MARK = " #"


@dataclass
class TaskPlan:
    scenario: str
    target: str  # label of the server under test: minicoord, echo, other
    bootstrap: str
    task: int
    tasks: int
    # (step label, [(group id, member index, expected group size)]): members this task adds,
    # step by step (one step for most scenarios; scale adds members in waves).
    waves: list[tuple[str, list[tuple[str, int, int]]]]
    params: dict[str, Any] = field(default_factory=dict)
    echo: bool = False  # the target only answers Heartbeats (bench/echo_server.py)
    server_pid: int | None = None  # for RSS and CPU gauges when the server runs on this host
    progress: tuple[str, int] | None = None  # the driver's ProgressBoard (bench/progress.py)
    job: str = ""  # this stage's key on that board

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.bootstrap.rpartition(":")
        return host.strip("[]"), int(port)


def round_step(step: str, round_: int) -> str:
    """A step's label in round `round_` of a run whose targets alternate round by round
    ("heartbeat #2"); round 0 is a run without rounds, where labels stay as they are."""
    return f"{step}{ROUND_MARK}{round_}" if round_ else step


def split_round(step: str) -> tuple[str, int]:
    """(label, round) of a step label made by `round_step`."""
    base, mark, number = step.rpartition(ROUND_MARK)
    if mark and number.isdigit():
        return base, int(number)
    return step, 0


def executor_address() -> str:
    """host:port of the Spark executor running this task ("" outside a barrier stage).

    Spark's Python API names no executor id; the address the scheduler gives each barrier
    task is the executor's own RPC endpoint, one per executor, so it tells executors apart
    even when several share a host."""
    try:
        from pyspark import BarrierTaskContext, TaskContext
    except ImportError:
        return ""
    ctx = TaskContext.get()
    if not isinstance(ctx, BarrierTaskContext):
        return ""
    return ctx.getTaskInfos()[ctx.partitionId()].address


@dataclass(eq=False)
class Sim:
    """A member and what the scenario tracks about it."""

    member: Any  # TrackedGroupMember or TrackedConsumerMember (protocol_members.py)
    slot: int
    expected: int  # group size at which this member counts as settled
    started_at: float = 0.0  # perf_counter when it sent FindCoordinator
    settled_at: float = 0.0
    failed: int = 0  # error code of a failure (-1: client side)


class TaskRun:
    """The state of one task: plan, recorder, connections, members, output rows."""

    def __init__(self, plan: TaskPlan) -> None:
        self.plan = plan
        self.p = plan.params
        self.recorder = Recorder()
        self.barrier = Barrier(plan.tasks)
        self.pool = ConnectionPool(
            self.p.get("connections", "per-member"),
            int(self.p.get("members_per_connection", 1)),
            f"bench-{plan.target}-{plan.task}",
        )
        self.sims: list[Sim] = []
        self.out: list[tuple] = []
        self.partitions: dict[str, int] = {}
        self.topic_ids: dict[uuid.UUID, str] = {}
        self.describer = Describer(*plan.host_port, f"bench-{plan.target}-{plan.task}-describe")
        self.executor = executor_address()

    def counters(self, finished: bool = False) -> Counters:
        sims = self.sims
        return Counters(
            tasks=1,
            finished=int(finished),
            members=len(sims),
            started=sum(1 for s in sims if s.started_at),
            settled=sum(1 for s in sims if s.settled_at > 0),
            failed=sum(1 for s in sims if s.failed),
            requests=self.recorder.requests,
        )

    # -- output --------------------------------------------------------------------------

    def emit(self, step: str) -> None:
        """Move what the recorder holds into the output rows under `step` (tagged with the
        round, when targets alternate in rounds: see `round_step`)."""
        target, task, executor = self.plan.target, self.plan.task, self.executor
        step = round_step(step, int(self.p.get("round", 0)))
        # Exact Python types for the schema: Spark is told not to re-verify every row.
        self.out.extend(
            (
                target,
                step,
                task,
                executor,
                m.kind,
                m.op,
                m.group_id,
                int(m.member),
                int(m.group_size),
                int(m.generation),
                float(m.start),
                float(m.end),
                float(m.latency_ms),
                int(m.error),
                float(m.value),
            )
            for m in self.recorder.rows()
        )
        self.recorder.clear()

    def gauge(
        self,
        op: str,
        value: float,
        t0: float | None = None,
        t1: float | None = None,
        group_size: int = 0,
    ) -> None:
        self.recorder.add(KIND_GAUGE, op, t0=t0, t1=t1, value=value, group_size=group_size)

    def server_gauge(self, op: str, members: int = 0) -> None:
        """RSS of the server process (task 0 only, when the server runs on this host)."""
        pid = self.plan.server_pid
        if self.plan.task == 0 and pid is not None:
            rss = rss_kib(pid)
            if rss is not None:
                self.gauge(op, rss, group_size=members)

    # -- CPU -------------------------------------------------------------------------------

    def cpu_window(self) -> CpuWindow:
        return CpuWindow(self)

    # -- members ---------------------------------------------------------------------------

    @property
    def protocol(self) -> str:
        return str(self.p.get("group_protocol") or CLASSIC)

    def make_members(self, entries: list[tuple[str, int, int]]) -> list[Sim]:
        p = self.p
        shared = self.pool.mode == "shared" or self.protocol == CONSUMER
        new = []
        for group_id, index, expected in entries:
            member = make_member(
                self.protocol,
                group_id,
                [p["topic"]],
                index=index,
                params=p,
                group_instance_id=f"{group_id}-i{index}" if p.get("static") else None,
                recorder=self.recorder,
                # Shared connections answer in order: a leader's Metadata queued behind its
                # group's parked JoinGroups would wait for ever, so with sharing the task
                # learns partition counts once, before the start (see `connect`). Consumer
                # members need the topic ids of their assignments: learnt the same way.
                partitions=self.partitions if shared else None,
                topic_ids=self.topic_ids,
            )
            sim = Sim(member, len(self.sims), expected)
            self.sims.append(sim)
            new.append(sim)
        return new

    async def connect(self, sims: list[Sim]) -> None:
        """Open each member's bootstrap connection (before any timed phase starts)."""
        host, port = self.plan.host_port
        await asyncio.gather(*(self._attach(s, host, port) for s in sims))
        shared = self.pool.mode == "shared" or self.protocol == CONSUMER
        if sims and shared and not self.plan.echo:
            topics = {t for s in sims for t in s.member.topics}
            if not topics <= self.partitions.keys() or (
                self.protocol == CONSUMER and not topics <= set(self.topic_ids.values())
            ):
                await sims[0].member.fetch_metadata()

    async def _attach(self, sim: Sim, host: str, port: int) -> None:
        sim.member.conn = await self.pool.get(sim.slot, host, port)

    def settling(
        self,
        sims: list[Sim],
        on_settled: Callable[[Sim, float], None],
        expected: Callable[[Sim], int] | None = None,
        after: float = 0.0,
    ) -> Settling:
        """A watch over `sims` until each is settled at its group's expected size (its
        `Sim.expected` unless `expected` says otherwise): settling.py."""
        return Settling(
            sims,
            self.protocol,
            expected or (lambda s: s.expected),
            int(self.p.get("partitions", 0)),
            self.describer,
            on_settled,
            after,
        )

    async def join_members(self, sims: list[Sim], spread_s: float = 0.0) -> bool:
        """FindCoordinator, join (and sync) every member; start their heartbeats.

        Returns once every member is settled in a group of its expected size (or failed),
        False on timeout. Member i starts `i * spread / n` after the call, so a spread turns
        a thundering herd into a steady arrival rate.
        """
        if not sims:
            return True

        def settled(sim: Sim, t: float) -> None:
            sim.settled_at = t

        watch = self.settling(sims, settled)

        async def one(sim: Sim, delay: float) -> None:
            if delay:
                await asyncio.sleep(delay)
            member = sim.member
            sim.started_at = time.perf_counter()
            try:
                _, host, port = await member.find_coordinator()
                if (host, port) != self.plan.host_port:
                    member.conn = await self.pool.get(sim.slot, host, port)
                await member.join()
                member.start_heartbeats()
            except (MemberError, ConnectionError) as exc:
                sim.failed = getattr(exc, "error", -1)
                self.recorder.phase(
                    "failure",
                    member.group_id,
                    member.index,
                    sim.started_at,
                    time.perf_counter(),
                    error=sim.failed,
                )
                if not sim.settled_at:
                    sim.settled_at = -1.0
                watch.fail(sim)

        n = len(sims)
        starters = [asyncio.ensure_future(one(s, spread_s * i / n)) for i, s in enumerate(sims)]
        ok = await watch.wait(float(self.p.get("timeout_s", 120)) + spread_s)
        for t in starters:
            if not t.done():
                t.cancel()
        await asyncio.gather(*starters, return_exceptions=True)
        return ok and not any(s.failed for s in sims)

    def record_joins(self, sims: list[Sim]) -> None:
        """Per member: join (first JoinGroup or ConsumerGroupHeartbeat -> settled), cold_join
        (from FindCoordinator), and the partitions it holds."""
        for s in sims:
            m = s.member
            if s.settled_at <= 0:
                self.recorder.phase(
                    "join",
                    m.group_id,
                    m.index,
                    m.first_join_at or s.started_at,
                    time.perf_counter(),
                    error=s.failed or -1,
                    group_size=s.expected,
                )
                continue
            common = {"group_size": m.group_size, "generation": m.generation}
            # Classic: JoinGroup round trips; consumer protocol: assignments taken.
            trips = getattr(m, "joins", m.rounds)
            self.recorder.phase(
                "join", m.group_id, m.index, m.first_join_at, s.settled_at, value=trips, **common
            )
            self.recorder.phase(
                "cold_join", m.group_id, m.index, s.started_at, s.settled_at, **common
            )
            for topic, partitions in m.assignment.items():
                for partition in partitions:
                    self.recorder.add(
                        KIND_ASSIGNMENT,
                        f"{topic}:{partition}",
                        m.group_id,
                        m.index,
                        t0=s.settled_at,
                        **common,
                    )

    def fake_members(self, sims: list[Sim]) -> None:
        """Against the echo server: members that skip joining (it answers only Heartbeats)."""
        for s in sims:
            s.member.member_id = f"echo-member-{s.member.index}"
            s.member.generation = 1

    async def leave_all(self, sims: list[Sim] | None = None) -> None:
        sims = self.sims if sims is None else sims
        if self.plan.echo:
            return
        await asyncio.gather(
            *(s.member.leave("benchmark done") for s in sims), return_exceptions=True
        )

    async def stop_heartbeats(self, sims: list[Sim] | None = None) -> None:
        sims = self.sims if sims is None else sims
        await asyncio.gather(*(s.member.stop_heartbeats() for s in sims))

    async def close(self) -> None:
        """Stop every member's heartbeats; close the members' and the poller's connections."""
        for s in self.sims:
            await s.member.stop_heartbeats()
        await self.pool.close()
        await self.describer.close()


class CpuWindow:
    """CPU over one timed window: this task's process (a task near one core means the load
    generator set the pace), and on task 0 the server's and the whole machine's busy cores
    (near all of them: nobody had a core to spare). Recorded as gauges by `stop`."""

    def __init__(self, run: TaskRun) -> None:
        self.run = run
        pid = run.plan.server_pid
        first = run.plan.task == 0
        self.server0 = cpu_seconds(pid) if pid and first else None
        self.client0 = time.process_time()
        self.host0 = host_busy_seconds() if first else None
        self.describes0 = run.describer.polls

    def stop(self, start: float, end: float) -> None:
        run, pid = self.run, self.run.plan.server_pid
        if self.server0 is not None and pid:
            server1 = cpu_seconds(pid)
            if server1 is not None:
                run.gauge("server_cpu_s", server1 - self.server0, start, end)
        run.gauge("client_cpu_s", time.process_time() - self.client0, start, end)
        host1 = host_busy_seconds() if self.host0 is not None else None
        if self.host0 is not None and host1 is not None:
            run.gauge("host_busy_s", host1 - self.host0, start, end)
        polls = run.describer.polls - self.describes0
        if polls:
            run.gauge("describe_polls", polls, start, end)
