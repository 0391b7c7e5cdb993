"""What one Spark task runs: an event loop driving its share of the simulated members.

The driver (`minicoord.bench.runner`) cuts a scenario into `TaskPlan`s, one per task of a
barrier stage; `run_task` runs a plan to completion on a fresh uvloop loop and yields one
row per measurement. Tasks agree on a common start (and on every later phase of a scenario)
through Spark's `BarrierTaskContext.allGather`, run in a thread so that heartbeats go on while
a task waits for the others. Without Spark (tests, a single process) the same code runs with
a one-task barrier.

Everything here is imported inside the Python workers, so it must not import pyspark at
module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import resource
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minicoord.bench.progress import Counters, ProgressSender
from minicoord.clients.connection import ProtocolClient
from minicoord.clients.member import GroupMember
from minicoord.clients.member_base import MemberError
from minicoord.clients.timings import (
    EPOCH_OFFSET,
    KIND_ASSIGNMENT,
    KIND_GAUGE,
    KIND_PHASE,
    Recorder,
)

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

CONNECT_CONCURRENCY = 256  # connects in flight per task: stays well inside the listen backlog
START_LEAD_S = 0.3  # common start this far after the last task reported ready


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


# -- process statistics (Linux /proc) ------------------------------------------------------


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB, or None when it cannot be read (not on this host)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used, or None when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


# -- coordination between tasks ------------------------------------------------------------


class Barrier:
    """allGather across the tasks of one barrier stage; trivial when there is one task."""

    def __init__(self, tasks: int) -> None:
        self._ctx: Any = None
        if tasks > 1:
            from pyspark import BarrierTaskContext

            self._ctx = BarrierTaskContext.get()

    async def gather(self, message: str) -> list[str]:
        if self._ctx is None:
            return [message]
        # Blocking call: a thread keeps the loop (and the members' heartbeats) running.
        return await asyncio.get_running_loop().run_in_executor(None, self._ctx.allGather, message)

    async def common_start(self) -> float:
        """A perf_counter instant shortly after every task got here; sleeps until it."""
        stamps = await self.gather(repr(time.time()))
        start_epoch = max(float(s) for s in stamps) + START_LEAD_S
        start = start_epoch - EPOCH_OFFSET
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        return start

    async def all_ok(self, ok: bool) -> bool:
        return all(flag == "1" for flag in await self.gather("1" if ok else "0"))


class ConnectionPool:
    """Connections for members: one per member, or one shared by every `per_conn` members.

    Slots are a task's member positions; with sharing, consecutive slots (the members of one
    group, as plans list them) share a connection. minicoord, like Kafka, answers a
    connection's requests in order, so a JoinGroup parked for its group holds back the other
    answers on its connection: sharing is for heartbeat-heavy loads, not join storms of
    unrelated groups.
    """

    def __init__(self, mode: str, per_conn: int, client_id: str) -> None:
        self.mode = mode
        self.per_conn = max(1, per_conn)
        self.client_id = client_id
        self._conns: dict[tuple[str, int, int], ProtocolClient] = {}
        self._opening: dict[tuple[str, int, int], asyncio.Future[ProtocolClient]] = {}
        self._limit = asyncio.Semaphore(CONNECT_CONCURRENCY)

    def _key(self, slot: int, host: str, port: int) -> tuple[str, int, int]:
        return host, port, slot if self.mode == "per-member" else slot // self.per_conn

    async def get(self, slot: int, host: str, port: int) -> ProtocolClient:
        key = self._key(slot, host, port)
        conn = self._conns.get(key)
        if conn is not None:
            return conn
        pending = self._opening.get(key)
        if pending is not None:
            return await pending
        future: asyncio.Future[ProtocolClient] = asyncio.get_running_loop().create_future()
        self._opening[key] = future
        try:
            async with self._limit:
                conn = await ProtocolClient.connect(host, port, f"{self.client_id}-{key[2]}")
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when none waits
            del self._opening[key]
            raise
        self._conns[key] = conn
        del self._opening[key]
        future.set_result(conn)
        return conn

    async def open(self, slots: range, host: str, port: int) -> None:
        await asyncio.gather(*(self.get(s, host, port) for s in slots))

    def __len__(self) -> int:
        return len(self._conns)

    async def close(self) -> None:
        conns = list(self._conns.values())
        self._conns.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


@dataclass(eq=False)
class Sim:
    """A member and what the scenario tracks about it."""

    member: GroupMember
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
        """Move what the recorder holds into the output rows under `step`."""
        target, task, executor = self.plan.target, self.plan.task, self.executor
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

    # -- members ---------------------------------------------------------------------------

    def make_members(self, entries: list[tuple[str, int, int]]) -> list[Sim]:
        p = self.p
        new = []
        for group_id, index, expected in entries:
            member = GroupMember(
                None,  # type: ignore[arg-type]  # connected in join_members
                group_id,
                [p["topic"]],
                index=index,
                assignor=p.get("assignor", "range"),
                session_timeout_ms=int(p.get("session_timeout_ms", 30_000)),
                rebalance_timeout_ms=int(p.get("rebalance_timeout_ms", 60_000)),
                heartbeat_interval_ms=int(p.get("heartbeat_interval_ms", 3_000)),
                group_instance_id=f"{group_id}-i{index}" if p.get("static") else None,
                recorder=self.recorder,
                # Shared connections answer in order: a leader's Metadata queued behind its
                # group's parked JoinGroups would wait for ever, so with sharing the task
                # learns partition counts once, before the start (see `connect`).
                partitions=self.partitions if self.pool.mode == "shared" else None,
            )
            sim = Sim(member, len(self.sims), expected)
            self.sims.append(sim)
            new.append(sim)
        return new

    async def connect(self, sims: list[Sim]) -> None:
        """Open each member's bootstrap connection (before any timed phase starts)."""
        host, port = self.plan.host_port
        await asyncio.gather(*(self._attach(s, host, port) for s in sims))
        if sims and self.pool.mode == "shared" and not self.partitions and not self.plan.echo:
            await sims[0].member.fetch_metadata()

    async def _attach(self, sim: Sim, host: str, port: int) -> None:
        sim.member.conn = await self.pool.get(sim.slot, host, port)

    async def join_members(self, sims: list[Sim], spread_s: float = 0.0) -> bool:
        """FindCoordinator, join and sync every member; start their heartbeats.

        Returns once every member holds an assignment of a generation with the group's
        expected size (or failed), False on timeout. Member i starts `i * spread / n` after
        the call, so a spread turns a thundering herd into a steady arrival rate.
        """
        if not sims:
            return True
        remaining = len(sims)
        done = asyncio.Event()
        by_member = {id(s.member): s for s in sims}

        def settled(sim: Sim) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                done.set()

        def on_assigned(member: GroupMember) -> None:
            sim = by_member[id(member)]
            if not sim.settled_at and member.group_size >= sim.expected:
                sim.settled_at = member.assigned_at
                settled(sim)

        async def one(sim: Sim, delay: float) -> None:
            if delay:
                await asyncio.sleep(delay)
            member = sim.member
            member.on_assigned = on_assigned
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
                    settled(sim)

        n = len(sims)
        starters = [asyncio.ensure_future(one(s, spread_s * i / n)) for i, s in enumerate(sims)]
        timeout = float(self.p.get("timeout_s", 120)) + spread_s
        try:
            await asyncio.wait_for(done.wait(), timeout)
            ok = True
        except TimeoutError:
            ok = False
        for t in starters:
            if not t.done():
                t.cancel()
        await asyncio.gather(*starters, return_exceptions=True)
        return ok and not any(s.failed for s in sims)

    def record_joins(self, sims: list[Sim]) -> None:
        """Per member: join (first JoinGroup -> settled assignment), cold_join (from
        FindCoordinator), and the partitions it holds."""
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
            self.recorder.phase(
                "join",
                m.group_id,
                m.index,
                m.first_join_at,
                s.settled_at,
                value=m.joins,
                **common,
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


# -- scenarios -----------------------------------------------------------------------------


async def cold_join(run: TaskRun) -> None:
    """Members of G groups start at once (or spread); each group must settle at its size."""
    step, entries = run.plan.waves[0]
    sims = run.make_members(entries)
    await run.connect(sims)
    await run.barrier.common_start()
    await run.join_members(sims, float(run.p.get("start_spread_ms", 0)) / 1000)
    run.record_joins(sims)
    # Keep heartbeating until every task's members settled: a group spread over tasks must
    # not lose members (and rebalance) because one task finished first.
    await run.barrier.gather("settled")
    await run.leave_all()
    run.emit(step)


class _Reassigned:
    """One rejoin round: records each member's reassignment once its generation has the
    round's expected size, and signals when every member of this task has one."""

    def __init__(self, run: TaskRun, expected: int) -> None:
        self.run = run
        self.expected = expected
        self.start = 0.0
        self.pending: dict[int, Sim] = {}
        self.done = asyncio.Event()

    def watch(self, sims: list[Sim]) -> None:
        for sim in sims:
            self.pending[id(sim.member)] = sim
            sim.member.on_assigned = self

    def __call__(self, member: GroupMember) -> None:
        if id(member) not in self.pending or member.group_size < self.expected:
            return
        del self.pending[id(member)]
        self.run.recorder.phase(
            "rejoin",
            member.group_id,
            member.index,
            self.start,
            member.assigned_at,
            group_size=member.group_size,
            generation=member.generation,
        )
        if not self.pending:
            self.done.set()


async def rejoin(run: TaskRun) -> None:
    """A Stable group of M, then newcomers one at a time: time until all are reassigned."""
    _, entries = run.plan.waves[0]
    sims = run.make_members(entries)
    await run.connect(sims)
    await run.barrier.common_start()
    await run.join_members(sims)
    run.record_joins(sims)
    await run.barrier.gather("stable")
    run.emit("setup")
    group_id = entries[0][0] if entries else str(run.p["group"])
    members = int(run.p["members"])
    timeout = float(run.p.get("timeout_s", 120))
    for r in range(1, int(run.p.get("rounds", 3)) + 1):
        expected = members + r
        tracker = _Reassigned(run, expected)
        newcomer: list[Sim] = []
        if run.plan.task == 0:
            newcomer = run.make_members([(group_id, expected - 1, expected)])
            await run.connect(newcomer)
        tracker.watch(run.sims)
        start = tracker.start = await run.barrier.common_start()
        if newcomer:
            run.recorder.add("mark", "newcomer_start", group_id, expected - 1, t0=start)
            sim = newcomer[0]
            sim.started_at = start
            await sim.member.find_coordinator()
            await sim.member.join()
            sim.member.start_heartbeats()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tracker.done.wait(), timeout)
        for sim in tracker.pending.values():
            run.recorder.phase(
                "rejoin",
                sim.member.group_id,
                sim.member.index,
                start,
                time.perf_counter(),
                error=-1,
                group_size=expected,
            )
        await run.barrier.gather(f"round {r}")
        run.emit(f"round={r}")
    await run.leave_all()
    run.emit("teardown")


async def churn(run: TaskRun) -> None:
    """Members join, stay a while, leave, and come back as new members, for T seconds."""
    step, entries = run.plan.waves[0]
    sims = run.make_members(entries)
    await run.connect(sims)
    duration = float(run.p.get("duration_s", 10))
    life_ms = float(run.p.get("lifetime_ms", 3000))
    pause_ms = float(run.p.get("pause_ms", 500))
    rng = random.Random(run.plan.task)
    start = await run.barrier.common_start()
    deadline = start + duration

    async def life(sim: Sim) -> None:
        member = sim.member
        # Spread the first arrivals over one pause, so the churn is a flow, not a burst.
        await asyncio.sleep(rng.uniform(0, pause_ms / 1000))
        sim.started_at = time.perf_counter()
        try:
            _, host, port = await member.find_coordinator()
            if (host, port) != run.plan.host_port:
                member.conn = await run.pool.get(sim.slot, host, port)
        except (MemberError, ConnectionError):
            return
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            try:
                member.member_id = ""  # each life is a new dynamic member
                await member.join()
                member.start_heartbeats()
                stay = rng.expovariate(1000 / life_ms)
                await asyncio.sleep(min(stay, max(0.0, deadline - time.perf_counter())))
                await member.leave("churn")
            except (MemberError, ConnectionError) as exc:
                error = getattr(exc, "error", -1)
                run.recorder.phase(
                    "failure", member.group_id, member.index, t0, time.perf_counter(), error=error
                )
                await member.stop_heartbeats()
            await asyncio.sleep(rng.expovariate(1000 / pause_ms))

    lives = [asyncio.ensure_future(life(s)) for s in sims]
    grace = float(run.p.get("rebalance_timeout_ms", 60_000)) / 1000
    _, late = await asyncio.wait(lives, timeout=max(0.0, deadline - time.perf_counter()) + grace)
    for t in late:
        t.cancel()
    await asyncio.gather(*lives, return_exceptions=True)
    await run.barrier.gather("churned")
    await run.leave_all([s for s in sims if s.member.member_id])
    run.emit(step)


async def _stable_population(run: TaskRun) -> list[Sim]:
    _, entries = run.plan.waves[0]
    sims = run.make_members(entries)
    await run.connect(sims)
    if run.plan.echo:
        run.fake_members(sims)
        await run.barrier.gather("ready")
        return sims
    await run.barrier.common_start()
    ok = await run.join_members(sims)
    run.record_joins(sims)
    if not await run.barrier.all_ok(ok):
        raise RuntimeError("the population did not settle; see the setup rows")
    run.emit("setup")
    return sims


def _rate_steps(run: TaskRun) -> list[tuple[str, float | None]]:
    steps: list[tuple[str, float | None]] = []
    if run.p.get("back_to_back", True):
        steps.append(("back-to-back", None))
    steps += [(f"rate={int(r)}", float(r)) for r in run.p.get("rates", [])]
    return steps


async def _timed_steps(run: TaskRun, sims: list[Sim], op: Callable[[Sim], Awaitable[None]]) -> None:
    """Run `op` per member back to back, then at each fixed aggregate rate, for a duration
    each; server CPU seconds per step are recorded when the server is on this host."""
    duration = float(run.p.get("duration_s", 5))
    total = int(run.p["members"])
    for label, rate in _rate_steps(run):
        start = await run.barrier.common_start()
        deadline = start + duration
        cpu0 = cpu_seconds(run.plan.server_pid) if run.plan.server_pid else None
        # This task's own CPU: a client near one full core means the load generator, not
        # the server, set the pace of this step.
        client_cpu0 = time.process_time()

        async def drive(
            sim: Sim, rate: float | None = rate, start: float = start, deadline: float = deadline
        ) -> None:
            if rate is None:
                while time.perf_counter() < deadline:
                    await op(sim)
                return
            # Each member sends one request per `interval`, members phase-shifted evenly:
            # the aggregate over every task is `rate` per second.
            interval = total / rate
            due = start + interval * (sim.member.index % total) / total
            while due < deadline:
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await op(sim)
                # Behind schedule: no burst to catch up, like a client with one request in
                # flight (what Kafka consumers do for heartbeats).
                due = max(due + interval, time.perf_counter())

        results = await asyncio.gather(*(drive(s) for s in sims), return_exceptions=True)
        for err in results:
            if isinstance(err, BaseException):
                run.recorder.add(KIND_PHASE, "failure", error=-1)
        end = time.perf_counter()
        if cpu0 is not None and run.plan.server_pid:
            cpu1 = cpu_seconds(run.plan.server_pid)
            if cpu1 is not None and run.plan.task == 0:
                run.gauge("server_cpu_s", cpu1 - cpu0, start, end)
        run.gauge("offered_rate", rate or 0.0, start, end)
        run.gauge("client_cpu_s", time.process_time() - client_cpu0, start, end)
        await run.barrier.gather(f"{label} done")
        run.emit(label)


async def heartbeat(run: TaskRun) -> None:
    """A Stable population heartbeating back to back and at fixed aggregate rates."""
    sims = await _stable_population(run)
    # The steps send the heartbeats now; background loops would add unmeasured load.
    await run.stop_heartbeats()

    async def beat(sim: Sim) -> None:
        await sim.member.heartbeat()

    await _timed_steps(run, sims, beat)
    await run.leave_all()
    await run.barrier.gather("left")
    run.emit("teardown")


async def commit(run: TaskRun) -> None:
    """Members of Stable groups commit their partitions' offsets; then fetch and verify."""
    sims = await _stable_population(run)
    acked: dict[int, dict[tuple[str, int], int]] = {s.slot: {} for s in sims}
    next_offset = dict.fromkeys(acked, 0)

    async def commit_once(sim: Sim) -> None:
        owned = sim.member.owned()
        if not owned:
            await asyncio.sleep(0.05)  # a member with no partitions has nothing to commit
            return
        next_offset[sim.slot] += 1
        offset = next_offset[sim.slot]
        errors = await sim.member.commit(dict.fromkeys(owned, offset))
        for tp, error in errors.items():
            if not error:
                acked[sim.slot][tp] = offset

    await _timed_steps(run, sims, commit_once)
    t0 = time.perf_counter()
    mismatches = 0
    for s in sims:
        if acked[s.slot]:
            fetched = await s.member.fetch_offsets(sorted(acked[s.slot]))
            mismatches += sum(1 for tp, off in acked[s.slot].items() if fetched.get(tp) != off)
    run.recorder.phase(
        "verify_offsets",
        "",
        -1,
        t0,
        time.perf_counter(),
        error=1 if mismatches else 0,
        value=mismatches,
    )
    await run.barrier.gather("verified")
    await run.leave_all()
    run.emit("verify")


async def scale(run: TaskRun) -> None:
    """Add members in waves, holding every wave Stable; server RSS after each."""
    hold = float(run.p.get("hold_s", 10))
    run.server_gauge("server_rss_kib", 0)
    run.emit("members=0")
    total = 0
    for step, entries in run.plan.waves:
        total = int(step.split("=", 1)[1])
        sims = run.make_members(entries)
        await run.connect(sims)
        await run.barrier.common_start()
        ok = await run.join_members(sims, float(run.p.get("start_spread_ms", 0)) / 1000)
        run.record_joins(sims)
        ok = await run.barrier.all_ok(ok)
        # Hold: every member heartbeats at its interval; errors here mean the server lost
        # members (session expiry) under this population.
        await asyncio.sleep(hold)
        run.server_gauge("server_rss_kib", total)
        client_rss = rss_kib(os.getpid())
        if client_rss is not None:
            run.gauge("client_rss_kib", client_rss, group_size=len(run.sims))
        run.gauge("connections", len(run.pool), group_size=len(run.sims))
        ok = await run.barrier.all_ok(ok and not any(s.failed for s in run.sims))
        run.gauge("wave_ok", 1.0 if ok else 0.0, group_size=total)
        run.emit(step)
        if not ok:
            break
    await run.leave_all()
    await run.barrier.gather("left")
    run.emit("teardown")


SCENARIOS: dict[str, Callable[[TaskRun], Awaitable[None]]] = {
    "cold-join": cold_join,
    "join-scaling": cold_join,
    "rejoin": rejoin,
    "churn": churn,
    "heartbeat": heartbeat,
    "commit": commit,
    "scale": scale,
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
        for s in run.sims:
            await s.member.stop_heartbeats()
        await run.pool.close()
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
