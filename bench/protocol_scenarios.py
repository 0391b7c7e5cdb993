"""The task side of `minicoord bench protocols`: the classic and the KIP-848 consumer protocol
side by side against one server. Its settle-time jobs are cold-join's (group_scenarios.py)
with the protocol set per job; here are the other two:

- `newcomer`: a Stable group of M members heartbeating at phases of their own, then one
  newcomer. From each old member's own
  view of what it owned over time (protocol_members.py): how long it was without the
  partitions it held both before and after (its unaffected partitions), how long it owned
  nothing, how many it gave up; and how long until the newcomer owned its share.
- `protocol_heartbeat`: a Stable group of M members on a connection each sends its
  protocol's heartbeat back to back (Heartbeat, or the steady-state ConsumerGroupHeartbeat
  that carries only group, member and epoch).

Every row's step names its protocol ("consumer newcomer", "classic heartbeat"), so one run
holds both and the report tells them apart.

Imported inside the Python workers: no pyspark at module level.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from minicoord.bench.group_scenarios import stable_population, timed_steps
from minicoord.bench.protocol_members import owned_at, reached, time_empty, time_without
from minicoord.bench.task_run import Sim, TaskRun
from minicoord.clients.timings import KIND_GAUGE


async def stagger_heartbeats(sims: list[Sim], rng: random.Random) -> None:
    """Restart each member's heartbeats at a random phase of its interval.

    Members that joined together heartbeat in step, and a newcomer that arrives at a fixed
    lead after they settled lands at the same phase of their cycle every time (with a 100 ms
    interval and the barrier's 300 ms lead: just before all of them heartbeat), which would
    make every old member learn of the rebalance at once. Members of a real group heartbeat
    at phases of their own: spread uniformly, the newcomer meets each at a random point of
    its cycle, as it would in production."""
    for sim in sims:
        await sim.member.stop_heartbeats()

    async def later(sim: Sim, delay: float) -> None:
        await asyncio.sleep(delay)
        sim.member.start_heartbeats()

    await asyncio.gather(
        *(later(s, rng.uniform(0, s.member.heartbeat_interval_ms / 1000)) for s in sims)
    )


async def newcomer(run: TaskRun) -> None:
    setup, entries = run.plan.waves[0]
    protocol = run.protocol
    sims = run.make_members(entries)
    await run.connect(sims)
    await run.barrier.common_start()
    ok = await run.join_members(sims)
    run.record_joins(sims)
    if not await run.barrier.all_ok(ok):
        raise RuntimeError(f"{protocol}: the group did not settle; see the setup rows")
    run.emit(setup)
    await stagger_heartbeats(sims, random.Random(run.plan.task))

    group_id = str(run.p["group"])
    members = int(run.p["members"])
    expected = members + 1
    late: list[Sim] = []
    if run.plan.task == 0:
        late = run.make_members([(group_id, members, expected)])
        await run.connect(late)
        # Found before the start: the round times the join itself.
        await late[0].member.find_coordinator()
    start = await run.barrier.common_start()
    before = {id(s): frozenset(s.member.owned()) for s in sims}
    settled: dict[int, float] = {}

    def on_settled(sim: Sim, t: float) -> None:
        settled[id(sim)] = t

    watch = run.settling([*sims, *late], on_settled, lambda _s: expected, after=start)
    cpu = run.cpu_window()
    joining = None
    if late:
        late[0].started_at = start
        run.recorder.add("mark", "newcomer_start", group_id, members, t0=start)

        async def join_late(member: Any = late[0].member) -> None:
            await member.join()
            member.start_heartbeats()

        joining = asyncio.ensure_future(join_late())
    ok = await watch.wait(float(run.p.get("timeout_s", 120)))
    end = time.perf_counter()
    cpu.stop(start, end)
    if joining is not None:
        if not joining.done():
            joining.cancel()
        await asyncio.gather(joining, return_exceptions=True)

    def gauge(op: str, sim: Sim, value: float) -> None:
        m = sim.member
        run.recorder.add(
            KIND_GAUGE,
            op,
            m.group_id,
            m.index,
            t0=start,
            t1=end,
            group_size=expected,
            generation=m.generation,
            value=value,
        )

    for sim in [*sims, *late]:
        m = sim.member
        t = settled.get(id(sim))
        run.recorder.phase(
            "resettled",
            m.group_id,
            m.index,
            start,
            t if t is not None else end,
            error=0 if t is not None else -1,
            group_size=expected,
            generation=m.generation,
        )
    for sim in sims:
        timeline = sim.member.timeline
        held, now_owned = before[id(sim)], owned_at(timeline, end)
        kept = held & now_owned
        gauge("kept_partitions", sim, len(kept))
        gauge("gave_up_partitions", sim, len(held - now_owned))
        gauge("gained_partitions", sim, len(now_owned - held))
        # Only members that keep something can be without it; every member can own nothing.
        if kept:
            gauge("without_kept_ms", sim, time_without(timeline, kept, start, end) * 1000)
        if held:
            gauge("owned_nothing_ms", sim, time_empty(timeline, start, end) * 1000)
    for sim in late:
        m = sim.member
        share = frozenset(m.owned())
        since = reached(m.timeline, share, start)
        run.recorder.phase(
            "newcomer_share",
            m.group_id,
            m.index,
            start,
            since if since is not None else end,
            error=0 if since is not None and ok else -1,
            group_size=expected,
            generation=m.generation,
            value=len(share),
        )
        # Classic: the member's own setting; consumer protocol: what the server said.
        gauge("heartbeat_interval_ms", sim, float(m.heartbeat_interval_ms))
    await run.barrier.gather("resettled")
    run.emit(f"{protocol} newcomer")
    await run.leave_all()
    run.emit(f"{protocol} teardown")


async def protocol_heartbeat(run: TaskRun) -> None:
    protocol = run.protocol
    setup = run.plan.waves[0][0]
    sims = await stable_population(run, setup)
    # The step sends the only heartbeats: background loops would add unmeasured load.
    await run.stop_heartbeats()

    async def beat(sim: Sim) -> None:
        await sim.member.heartbeat()

    await timed_steps(run, sims, beat, [(f"{protocol} heartbeat", None)])
    await run.leave_all()
    await run.barrier.gather("left")
    run.emit(f"{protocol} teardown")
