"""The machinery every Spark task of the bench shares: its plan, the barrier that lines the
tasks of a stage up, the connection pool and members of the coordinator scenarios, and the
output rows.

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
from dataclasses import dataclass, field
from typing import Any

from minicoord.bench.proc_stats import rss_kib
from minicoord.bench.progress import Counters
from minicoord.clients.connection import ProtocolClient
from minicoord.clients.member import GroupMember
from minicoord.clients.member_base import MemberError
from minicoord.clients.timings import (
    EPOCH_OFFSET,
    KIND_ASSIGNMENT,
    KIND_GAUGE,
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
ROUND_MARK = " #"
START_LEAD_S = 0.3  # common start at least this far after the last task reported ready
FIRST_GATHER_LAG_S = 1.05  # Spark's allGather lag before a task has seen one (local mode)
LAG_MARGIN = 1.2


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


# -- coordination between tasks ------------------------------------------------------------


class Barrier:
    """allGather across the tasks of one barrier stage; trivial when there is one task.

    Spark answers an allGather up to about a second after the last task called it, and not
    at the same moment in every task (measured in local mode: 0.1 s in one task, 1.0 s in the
    other). So every gather carries each task's clock and the worst lag it has seen, and a
    common start is set that far (with a margin) after the last task got there: otherwise
    one task would start its timed window most of a second after another.
    """

    def __init__(self, tasks: int) -> None:
        self._ctx: Any = None
        self._lag = 0.0  # the most this task's allGather answers came after the last call
        self._lags: list[float] = []  # every task's, as of the last gather
        self._calls: list[float] = []  # when each task called the last gather (epoch s)
        if tasks > 1:
            from pyspark import BarrierTaskContext

            self._ctx = BarrierTaskContext.get()

    async def gather(self, message: str) -> list[str]:
        if self._ctx is None:
            self._calls = [time.time()]
            return [message]
        stamped = f"{time.time()!r}|{self._lag!r}|{message}"
        # Blocking call: a thread keeps the loop (and the members' heartbeats) running.
        answers = await asyncio.get_running_loop().run_in_executor(
            None, self._ctx.allGather, stamped
        )
        answered = time.time()
        parts = [a.split("|", 2) for a in answers]
        self._lag = max(self._lag, answered - max(float(p[0]) for p in parts))
        self._lags = [float(p[1]) for p in parts]
        self._calls = [float(p[0]) for p in parts]
        return [p[2] for p in parts]

    def lead(self) -> float:
        """How long after the last task's call a common start can be: the same in every
        task, as it depends only on what all of them reported."""
        if self._ctx is None:
            return START_LEAD_S
        worst = max(self._lags) if self._lags and max(self._lags) > 0 else FIRST_GATHER_LAG_S
        return max(START_LEAD_S, worst * LAG_MARGIN + START_LEAD_S / 2)

    async def common_start(self) -> float:
        """A perf_counter instant shortly after every task got here; sleeps until it."""
        await self.gather("start")
        return await self.start_after_last_gather()

    async def start_after_last_gather(self) -> float:
        """common_start without a gather of its own: the one just made is the rendezvous
        (a scenario that gathers anyway saves Spark's second of lag)."""
        start = max(self._calls) + self.lead() - EPOCH_OFFSET
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
