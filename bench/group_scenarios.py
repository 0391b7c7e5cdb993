"""The coordinator scenarios, as each Spark task runs them: simulated members joining,
rebalancing, heartbeating and committing (cold-join, join-scaling, rejoin, churn, heartbeat,
commit, scale), with either group protocol (`--group-protocol`): the members' heartbeat,
commit and leave are the protocol's own, and settling is learnt as settling.py says.

Imported inside the Python workers: no pyspark at module level.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable

from minicoord.bench.proc_stats import rss_kib
from minicoord.bench.protocol_members import CONSUMER
from minicoord.bench.task_run import Sim, TaskRun
from minicoord.clients.consumer_member import client_member_id
from minicoord.clients.member_base import MemberError
from minicoord.clients.timings import KIND_PHASE


async def cold_join(run: TaskRun) -> None:
    """Members of G groups start at once (or spread); each group must settle at its size."""
    step, entries = run.plan.waves[0]
    sims = run.make_members(entries)
    await run.connect(sims)
    start = await run.barrier.common_start()
    cpu = run.cpu_window()
    await run.join_members(sims, float(run.p.get("start_spread_ms", 0)) / 1000)
    cpu.stop(start, time.perf_counter())
    run.record_joins(sims)
    # Keep heartbeating until every task's members settled: a group spread over tasks must
    # not lose members (and rebalance) because one task finished first.
    await run.barrier.gather("settled")
    await run.leave_all()
    run.emit(step)


async def rejoin(run: TaskRun) -> None:
    """A Stable group of M, then newcomers one at a time: time until all are reassigned
    (classic: every member holds the new generation's assignment; consumer protocol: the
    group is settled at the new size and every member has reached its new epoch)."""
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
        newcomer: list[Sim] = []
        if run.plan.task == 0:
            newcomer = run.make_members([(group_id, expected - 1, expected)])
            await run.connect(newcomer)
        start = await run.barrier.common_start()

        def reassigned(sim: Sim, t: float, start: float = start, expected: int = expected) -> None:
            m = sim.member
            run.recorder.phase(
                "rejoin",
                m.group_id,
                m.index,
                start,
                t,
                group_size=expected,
                generation=m.generation,
            )

        watch = run.settling(run.sims, reassigned, lambda _s, e=expected: e, after=start)
        if newcomer:
            run.recorder.add("mark", "newcomer_start", group_id, expected - 1, t0=start)
            sim = newcomer[0]
            sim.started_at = start
            await sim.member.find_coordinator()
            await sim.member.join()
            sim.member.start_heartbeats()
        await watch.wait(timeout)
        for sim in watch.pending.values():
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
                # Each life is a new dynamic member (consumer protocol: ids are the
                # client's own, KIP-1082).
                member.member_id = client_member_id() if run.protocol == CONSUMER else ""
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


async def stable_population(run: TaskRun, label: str = "setup") -> list[Sim]:
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
    run.emit(label)
    return sims


def _rate_steps(run: TaskRun) -> list[tuple[str, float | None]]:
    steps: list[tuple[str, float | None]] = []
    if run.p.get("back_to_back", True):
        steps.append(("back-to-back", None))
    steps += [(f"rate={int(r)}", float(r)) for r in run.p.get("rates", [])]
    return steps


async def timed_steps(
    run: TaskRun,
    sims: list[Sim],
    op: Callable[[Sim], Awaitable[None]],
    steps: list[tuple[str, float | None]] | None = None,
    just_gathered: bool = False,
) -> None:
    """Run `op` per member back to back, then at each fixed aggregate rate, for a duration
    each (or the (label, rate) `steps` given; rate None: back to back); server CPU seconds
    per step are recorded when the server is on this host. Each step starts from the
    previous step's closing gather (or the caller's, `just_gathered`): one Spark allGather
    less per step."""
    duration = float(run.p.get("duration_s", 5))
    total = int(run.p["members"])
    for n, (label, rate) in enumerate(_rate_steps(run) if steps is None else steps):
        if n or just_gathered:
            start = await run.barrier.start_after_last_gather()
        else:
            start = await run.barrier.common_start()
        deadline = start + duration
        cpu = run.cpu_window()

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
        cpu.stop(start, end)
        run.gauge("offered_rate", rate or 0.0, start, end)
        await run.barrier.gather(f"{label} done")
        run.emit(label)


async def heartbeat(run: TaskRun) -> None:
    """A Stable population heartbeating back to back and at fixed aggregate rates."""
    sims = await stable_population(run)
    # The steps send the heartbeats now; background loops would add unmeasured load.
    await run.stop_heartbeats()

    async def beat(sim: Sim) -> None:
        await sim.member.heartbeat()

    await timed_steps(run, sims, beat)
    await run.leave_all()
    await run.barrier.gather("left")
    run.emit("teardown")


class Committer:
    """Each member commits its partitions at the next offset; what was acknowledged is kept
    for `verify_offsets`."""

    def __init__(self, sims: list[Sim]) -> None:
        self.acked: dict[int, dict[tuple[str, int], int]] = {s.slot: {} for s in sims}
        self.next_offset = dict.fromkeys(self.acked, 0)

    async def __call__(self, sim: Sim) -> None:
        owned = sim.member.owned()
        if not owned:
            await asyncio.sleep(0.05)  # a member with no partitions has nothing to commit
            return
        self.next_offset[sim.slot] += 1
        offset = self.next_offset[sim.slot]
        errors = await sim.member.commit(dict.fromkeys(owned, offset))
        for tp, error in errors.items():
            if not error:
                self.acked[sim.slot][tp] = offset


async def verify_offsets(run: TaskRun, sims: list[Sim], committer: Committer) -> None:
    """OffsetFetch every partition a member committed: the last acknowledged offset each."""
    t0 = time.perf_counter()
    mismatches = 0
    for s in sims:
        acked = committer.acked[s.slot]
        if acked:
            fetched = await s.member.fetch_offsets(sorted(acked))
            mismatches += sum(1 for tp, off in acked.items() if fetched.get(tp) != off)
    t1 = time.perf_counter()
    error = 1 if mismatches else 0
    run.recorder.phase("verify_offsets", "", -1, t0, t1, error=error, value=mismatches)
    # How many offsets there were to verify: none acknowledged (every commit refused) is a
    # check that did not run, which the report must not read as passed.
    acked = sum(len(committer.acked[s.slot]) for s in sims)
    run.gauge("offsets_acknowledged", acked, t0, t1)


async def commit(run: TaskRun) -> None:
    """Members of Stable groups commit their partitions' offsets; then fetch and verify."""
    sims = await stable_population(run)
    committer = Committer(sims)
    await timed_steps(run, sims, committer)
    await verify_offsets(run, sims, committer)
    await run.barrier.gather("verified")
    await run.leave_all()
    run.emit("verify")


async def head_to_head(run: TaskRun) -> None:
    """One round of the steady half of `head-to-head` on one target: a Stable population
    heartbeats back to back, then commits back to back (heartbeat loops off: the steps send
    the only requests); offsets verified at the end."""
    sims = await stable_population(run)
    await run.stop_heartbeats()

    async def beat(sim: Sim) -> None:
        await sim.member.heartbeat()

    await timed_steps(run, sims, beat, [("heartbeat", None)])
    committer = Committer(sims)
    await timed_steps(run, sims, committer, [("commit", None)], just_gathered=True)
    await verify_offsets(run, sims, committer)
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
