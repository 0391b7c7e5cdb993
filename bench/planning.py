"""How a scenario is cut into barrier stages (jobs), and each stage into the tasks' shares.

A job is planned per target and per round; `runner.py` runs them, alternating targets round
by round when there are rounds (`--compare-rounds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Job:
    """One barrier stage: a label, and each task's waves of (group, member, expected size)."""

    label: str
    waves: list[list[tuple[str, list[tuple[str, int, int]]]]]  # per task
    topic: tuple[str, int]  # the topic its members subscribe to, and its partitions
    params: dict[str, Any] = field(default_factory=dict)
    scenario: str = ""  # the task function it runs (tasks.SCENARIOS), when not the run's own


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


def plan_jobs(o: dict[str, Any], tasks: int, prefix: str, round_: int = 0) -> list[Job]:
    """The stages of round `round_` (0: a run without rounds) on one target, in order;
    `prefix` names its groups and topics (unique to the run, target and round)."""
    scenario = o["scenario"]
    topic = (o["topic"], o["partitions"])
    if scenario == "data":
        return data_jobs(o, tasks, prefix)
    if scenario == "protocols":
        return protocol_jobs(o, tasks, prefix, round_)
    if scenario == "head-to-head":
        entries = _population(prefix, o["members"], o["group_size"])
        n = max(1, min(tasks, len(entries)))
        # A topic of its own, as join_job's: a peer started with a topic of the default name
        # (kfake-server -topics bench -partitions 64) would hand members other partitions.
        named = (f"{o['topic']}-steady-{o['partitions']}", o["partitions"])
        shares = [[("setup", e)] for e in _split(entries, n)]
        steady = Job("steady", shares, named, {"topic": named[0]})
        return [steady, join_job(o, tasks, f"{prefix}-join", o["join_members"], "join")]
    if scenario == "cold-join":
        entries = _groups(prefix, o["groups"], o["members"])
        return [Job("cold-join", [[("cold-join", e)] for e in _split(entries, tasks)], topic)]
    if scenario == "join-scaling":
        return [join_job(o, tasks, f"{prefix}-s{size}", size) for size in o["sizes"]]
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


PROTOCOLS = ("classic", "consumer")


def protocol_jobs(o: dict[str, Any], tasks: int, prefix: str, round_: int) -> list[Job]:
    """One round of `protocols`: for each group size a group of that size joining, then a
    newcomer joining a Stable group of --members, then that many members heartbeating back
    to back; every measure once per protocol, the protocols taking turns (classic first in
    odd rounds, consumer first in even ones), so that neither always runs on a server that
    just did the other's work."""
    order = PROTOCOLS[::-1] if round_ and round_ % 2 == 0 else PROTOCOLS
    members = o["members"]
    n = max(1, min(tasks, members))
    jobs = []
    for size in o["sizes"]:
        for protocol in order:
            job = join_job(
                o, tasks, f"{prefix}-{protocol}-s{size}", size, f"{protocol} size={size}"
            )
            job.params["group_protocol"] = protocol
            jobs.append(job)
    partitions = o["newcomer_partitions"]
    for protocol in order:
        group = f"{prefix}-{protocol}-newcomer"
        named = (f"{o['topic']}-newcomer-{partitions}", partitions)
        shares = [
            [(f"{protocol} newcomer setup", e)] for e in _split(_groups(group, 1, members), n)
        ]
        params = {"topic": named[0], "partitions": partitions, "group": f"{group}-g0"}
        params["group_protocol"] = protocol
        jobs.append(Job(f"{protocol} newcomer", shares, named, params, scenario="newcomer"))
    for protocol in order:
        group = f"{prefix}-{protocol}-hb"
        # One group, a partition and a connection per member: what each heartbeat costs.
        named = (f"{o['topic']}-{members}", members)
        shares = [
            [(f"{protocol} heartbeat setup", e)] for e in _split(_groups(group, 1, members), n)
        ]
        params = {"topic": named[0], "partitions": members, "group_protocol": protocol}
        params["connections"] = "per-member"
        jobs.append(
            Job(f"{protocol} heartbeat", shares, named, params, scenario="protocol-heartbeat")
        )
    return jobs


def join_job(o: dict[str, Any], tasks: int, prefix: str, size: int, label: str = "") -> Job:
    """One group of `size` members joining at once: its time to Stable is the measure."""
    label = label or f"size={size}"
    entries = _groups(prefix, 1, size)
    n = max(1, min(tasks, size))
    # A topic per size, with as many partitions as members (unless --partitions): a group
    # of 10 must not pay for encoding a 5,000-partition Metadata answer.
    sized = (f"{o['topic']}-{size}", o["partitions_given"] or size)
    return Job(
        label,
        [[(label, e)] for e in _split(entries, n)],
        sized,
        {"topic": sized[0], "partitions": sized[1]},
        scenario="cold-join",
    )


def data_jobs(o: dict[str, Any], tasks: int, prefix: str) -> list[Job]:
    """fill (with --fill-bytes), produce and consume (back to back), e2e per rate. Every
    task runs one producer and one consumer; the steps' topics are the run's own."""
    partitions = o["partitions"]

    def job(label: str, topic: str, **params: Any) -> Job:
        waves: list[list[tuple[str, list[tuple[str, int, int]]]]] = [
            [(label, [])] for _ in range(tasks)
        ]
        return Job(label, waves, (topic, partitions), {"data_topic": topic, **params})

    jobs = []
    if o["fill_bytes"]:
        records = -(-o["fill_bytes"] // o["record_bytes"])
        jobs.append(job("fill", f"{prefix}-fill", data_step="fill", step_records=records))
    if o["back_to_back"]:
        topic = f"{prefix}-produce"
        jobs.append(job("produce", topic, data_step="produce", step_records=o["records"]))
        group = f"{prefix}-consume"
        jobs.append(job("consume", topic, data_step="consume", data_group=group))
    for rate in o["rates"]:
        topic, group = f"{prefix}-e2e-{rate}", f"{prefix}-e2e-{rate}-group"
        jobs.append(
            job(f"e2e rate={rate}", topic, data_step="e2e", data_group=group, step_rate=rate)
        )
    return jobs
