"""`minicoord bench lean`: heartbeats, commits and ConsumerGroupHeartbeats per second, and
the time a large classic group takes to settle, against minicoord and a peer (kfake, Kafka)
in one run, with a client lean enough not to be the limit.

    minicoord bench lean --compare-bootstrap 127.0.0.1:9093 --compare-pid PID \\
        [--api heartbeat,commit,cghb,join] [--members 100] [--procs 2] [--secs 4] \\
        [--rounds 3] [--join-size 1000]

minicoord runs as its own process, in memory (and, with `--write-too`, a second one on a data
directory under `log.flush.policy=write`). For each API, `--members` members join one group on
topic `bench` (64 partitions; start the peer with it, e.g. `kfake -topics bench -partitions
64`), one connection each, then `--procs` processes send that API's frame back to back (see
bench/pump.py). Rounds alternate between the targets; each line gives the rate, the client's
CPU per load process and the server's CPU per request, and the summary the median of the
per-round ratios. The Spark scenarios (`heartbeat`, `commit`, `head-to-head`) measure the same
through real member tasks, where one Spark task tops out near 28k requests/s. `--api join`
(not in the default set: bench/lean_join.py) times `--join-size` members from the first
JoinGroup to all assigned, as the Spark scenario `join-scaling` does through full clients.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from minicoord.bench.arg_checks import add_peer_options
from minicoord.bench.pump import Rate, Target, frame, pump

TOPIC = "bench"
PARTITIONS = 64
APIS = ("heartbeat", "commit", "cghb")
EXTRA_APIS = ("join",)  # run only when named


# A member whose join failed this many times in a row is being refused, not racing a
# rebalance: the reason is printed, once per server and reason.
JOIN_FAILURES_TOLD = 3
_told: set[tuple[str, int, str]] = set()


def tell_join_refused(target: Target, exc: BaseException, session_timeout_ms: int) -> None:
    """Print, once per server and reason, why its joins keep failing."""
    from minicoord.clients.member_base import error_name
    from minicoord.protocol.errors import ErrorCode

    code = getattr(exc, "error", -1)
    reason = error_name(code) if code != -1 else f"{type(exc).__name__}: {exc}"
    if (target.host, target.port, reason) in _told:
        return
    _told.add((target.host, target.port, reason))
    line = f"joins to {target.host}:{target.port} keep failing: {reason}"
    if code == ErrorCode.INVALID_SESSION_TIMEOUT:
        line += (
            f" (the members ask for {session_timeout_ms:,} ms sessions: the server must allow "
            f"them, e.g. group.max.session.timeout.ms of at least {session_timeout_ms})"
        )
    print(line, flush=True)


async def join_classic(
    target: Target,
    group: str,
    n: int,
    connect: Callable[[int], Awaitable[Any]] | None = None,
    heartbeat_interval_ms: int = 100,
    settle_s: float = 30,
    session_timeout_ms: int = 60_000,
) -> list[Any]:
    """`n` classic members of `group`, joined and synced (heartbeats stopped), each on its
    own connection; `connect(i)` makes one (a TLS or SASL login, say). Members heartbeat
    until the group settles (one generation, all `n` in it), so one that joined before a
    rebalance learns of it and rejoins; SystemExit if it has not settled in `settle_s`."""
    from minicoord.clients.connection import ProtocolClient
    from minicoord.clients.member import GroupMember

    if connect is None:

        async def connect(i: int) -> Any:
            return await ProtocolClient.connect(target.host, target.port, f"joiner-{i}")

    conns = [await connect(i) for i in range(n)]
    members = [
        GroupMember(c, group, [TOPIC], index=i, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=60_000, heartbeat_interval_ms=heartbeat_interval_ms)
        for i, c in enumerate(conns)
    ]  # fmt: skip

    async def live(member: Any) -> None:
        failures = 0
        for _ in range(600):
            try:
                await member.join()
                failures = 0
                await member.heartbeat_loop()
            except Exception as exc:
                # kfake answers INCONSISTENT_GROUP_PROTOCOL to joins racing a rebalance: a
                # failure or two is a race; more in a row is a refusal, said once.
                failures += 1
                if failures == JOIN_FAILURES_TOLD:
                    tell_join_refused(target, exc, session_timeout_ms)
                await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(live(m)) for m in members]
    try:
        for _ in range(int(settle_s / 0.05)):
            generations = {m.generation for m in members}
            if len(generations) == 1 and all(m.group_size == n for m in members):
                return members
            await asyncio.sleep(0.05)
        raise SystemExit(f"the classic group on {target.host}:{target.port} did not settle")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _consumer(target: Target, group: str, n: int) -> list[Any]:
    from minicoord.clients.connection import ProtocolClient
    from minicoord.clients.consumer_member import ConsumerProtocolMember, describe_group

    conns = [
        await ProtocolClient.connect(target.host, target.port, f"joiner-{i}") for i in range(n)
    ]
    members = [ConsumerProtocolMember(c, group, [TOPIC], index=i) for i, c in enumerate(conns)]
    for m in members:
        await m.join()
        m.start_heartbeats()
    try:
        for _ in range(600):
            if (await describe_group(conns[0], group)).settled(n, PARTITIONS):
                return members
            await asyncio.sleep(0.05)
        raise SystemExit(f"the consumer group on {target.host}:{target.port} did not settle")
    finally:
        for m in members:
            await m.stop_heartbeats()


def frames_for(api: str, target: Target, members: int) -> list[bytes]:
    """Joins `members` members to a fresh group and returns one frame of `api` per member."""
    from kafka.protocol.consumer import HeartbeatRequest, OffsetCommitRequest
    from minicoord.protocol.consumer_group_apis import ConsumerGroupHeartbeatRequest

    group = f"lean-{api}-{time.monotonic_ns()}"
    join = _consumer if api == "cghb" else join_classic
    joined = asyncio.run(join(target, group, members))
    out = []
    for m in joined:
        if api == "cghb":
            request: Any = ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=m.member_id, member_epoch=m.generation,
                instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
                subscribed_topic_names=None, subscribed_topic_regex=None,
                server_assignor=None, topic_partitions=None,
            )  # fmt: skip
            # The member's own client id: a heartbeat naming another is no longer steady (the
            # server records the change) and would take the general path once per member.
            out.append(frame(request, 1, m.conn.client_id))
        elif api == "heartbeat":
            request = HeartbeatRequest(
                group_id=group, generation_id=m.generation, member_id=m.member_id,
                group_instance_id=None,
            )  # fmt: skip
            out.append(frame(request, 4, "lean"))
        else:
            owned = m.owned()
            topic, partition = owned[0] if owned else (TOPIC, 0)
            t = OffsetCommitRequest.OffsetCommitRequestTopic
            p = t.OffsetCommitRequestPartition
            request = OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=m.generation,
                member_id=m.member_id, group_instance_id=None,
                topics=[t(name=topic, partitions=[p(partition_index=partition,
                    committed_offset=12345, committed_leader_epoch=-1, committed_metadata="")])],
            )  # fmt: skip
            out.append(frame(request, 8, "lean"))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minicoord bench lean",
        description="heartbeats, commits and ConsumerGroupHeartbeats per second, and the time "
        "a large classic group takes to settle, against minicoord and a peer (kfake, Kafka) in "
        f"one run. The peer needs a topic '{TOPIC}' with {PARTITIONS} partitions "
        f"(kfake: -topics {TOPIC} -partitions {PARTITIONS}; minicoord: --topic "
        f"{TOPIC}:{PARTITIONS}).",
    )
    add_peer_options(
        p, f"the peer to compare with (it needs topic {TOPIC} with {PARTITIONS} partitions)", "CPU"
    )
    p.add_argument(
        "--api",
        default=",".join(APIS),
        help=f"comma-separated, of {','.join(APIS + EXTRA_APIS)} ({','.join(APIS)})",
    )
    p.add_argument(
        "--members", type=int, default=100, help="members joined per API, one connection each (100)"
    )
    p.add_argument("--procs", type=int, default=2, help="load processes sending the frames (2)")
    p.add_argument("--secs", type=float, default=4, help="seconds each round measures (4)")
    p.add_argument(
        "--rounds", type=int, default=3, help="rounds per API, the targets taking turns (3)"
    )
    p.add_argument(
        "--join-size",
        type=int,
        default=1000,
        help="members of the group that --api join times (1000)",
    )
    p.add_argument(
        "--write-too",
        action="store_true",
        help="also a minicoord on a data directory with log.flush.policy=write",
    )
    return p


async def _peer_partitions(host: str, port: int) -> int | None:
    """Partitions of topic `bench` on a server, from its Metadata (None: no such topic)."""
    from kafka.protocol.metadata import MetadataRequest
    from minicoord.clients.connection import ProtocolClient
    from minicoord.clients.member_base import VERSIONS, ZERO_UUID

    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC, topic_id=ZERO_UUID)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    async with await ProtocolClient.connect(host, port, "lean-check") as conn:
        response = await asyncio.wait_for(conn.request(request, VERSIONS["Metadata"]), 10)
    for topic in response.topics:
        if topic.name == TOPIC and topic.error_code == 0:
            return len(topic.partitions)
    return None


def check_peer(prog: str, host: str, port: int) -> None:
    """Exit 2, at once, when the peer is unreachable or lacks the topic the members
    subscribe to (its consumer groups would never settle: a 30 s wait and a vaguer error)."""
    from minicoord.bench.arg_checks import fail, require_reachable

    require_reachable(prog, "--compare-bootstrap", (host, port))
    where = f"{host}:{port}"
    try:
        partitions = asyncio.run(_peer_partitions(host, port))
    except Exception as exc:
        fail(prog, f"the peer at {where} did not answer a Metadata request: {exc!r}")
    create = (
        f"(kfake: -topics {TOPIC} -partitions {PARTITIONS}; minicoord: --topic "
        f"{TOPIC}:{PARTITIONS})"
    )
    if partitions is None:
        fail(
            prog,
            f"the peer at {where} has no topic '{TOPIC}' with {PARTITIONS} partitions: "
            f"create it {create}",
        )
    if partitions != PARTITIONS:
        fail(
            prog,
            f"the peer at {where} has topic '{TOPIC}' with {partitions} partitions, not "
            f"{PARTITIONS}: recreate it {create}",
        )


def main(argv: Sequence[str] | None = None) -> int:
    from minicoord.bench.arg_checks import (
        fail,
        peer_address,
        require_at_least,
        require_positive,
        server_error,
    )
    from minicoord.server.process import ServerProcess, start_server_process

    # Every argument is checked before anything starts: a wrong one leaves nothing running.
    parser = build_parser()
    o = parser.parse_args(argv)
    apis = [a.strip() for a in o.api.split(",") if a.strip()]
    unknown = set(apis) - set(APIS) - set(EXTRA_APIS)
    if unknown:
        parser.error(f"unknown --api {', '.join(sorted(unknown))}")
    if not apis:
        parser.error(f"--api names none of {','.join(APIS + EXTRA_APIS)}")
    require_at_least(parser, o, ("members", "procs", "rounds", "join_size"), 1)
    require_positive(parser, o, ("secs",))
    peer = peer_address(parser, o, ("minicoord", "minicoord-write"))
    if peer is not None:
        check_peer(parser.prog, *peer)
    # Members of every target wait idle while the others' rounds run: consumer-protocol
    # sessions as long as the classic members' (60 s), not minicoord's quick default (10 s).
    configs = {"group.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 60_000}
    # WARNING: the server's stderr is a pipe nobody reads while the load runs.
    quiet = ["--log-level", "WARNING"]
    servers: list[ServerProcess] = []
    data: str | None = None
    names = ["minicoord"]
    try:
        try:
            servers.append(start_server_process(configs, [(TOPIC, PARTITIONS)], extra_args=quiet))
            if o.write_too:
                data = tempfile.mkdtemp(prefix="minicoord-lean-")
                servers.append(
                    start_server_process(
                        {**configs, "log.flush.policy": "write"},
                        [(TOPIC, PARTITIONS)],
                        extra_args=quiet,
                        data_dir=data,
                    )
                )
                names.append("minicoord-write")
        except RuntimeError as exc:
            fail(parser.prog, f"minicoord did not start: {server_error(exc)}")
        targets = [
            (n, Target("127.0.0.1", s.port), s.proc.pid)
            for n, s in zip(names, servers, strict=True)
        ]
        if peer is not None:
            targets.insert(0, (o.compare_name, Target(*peer), o.compare_pid))
        for api in apis:
            if api == "join":
                run_join(targets, o)
            else:
                run_api(api, targets, o)
    finally:
        for server in servers:
            server.stop()
        if data is not None:  # the write-policy server's log, of no use after the run
            shutil.rmtree(data, ignore_errors=True)
    return 0


def answer_errors(api: str, answers: Sequence[bytes]) -> dict[str, int]:
    """Error names among connections' last answers (flexible header: correlation id and an
    empty tagged-field section), by how many connections got each."""
    from kafka.protocol.consumer import HeartbeatResponse, OffsetCommitResponse
    from minicoord.protocol.consumer_group_apis import ConsumerGroupHeartbeatResponse
    from minicoord.protocol.errors import ErrorCode

    found: dict[str, int] = {}
    for answer in answers:
        body = answer[5:]
        if api == "heartbeat":
            code = HeartbeatResponse.decode(body, version=4).error_code
        elif api == "commit":
            code = OffsetCommitResponse.decode(body, version=8).topics[0].partitions[0].error_code
        else:
            code = ConsumerGroupHeartbeatResponse.decode(body, version=1).error_code
        if code:
            name = ErrorCode(code).name
            found[name] = found.get(name, 0) + 1
    return found


def run_api(api: str, targets: list[tuple[str, Target, int]], o: Any) -> None:
    frames = {name: frames_for(api, target, o.members) for name, target, _ in targets}
    rates: dict[str, list[Rate]] = {name: [] for name, _, _ in targets}
    print(f"{api}: {o.members} members, {o.procs} load processes, {o.secs:g} s per round")
    for r in range(o.rounds):
        # Alternate the order, so neither side always runs on a machine the other warmed.
        order = targets if r % 2 == 0 else targets[::-1]
        for name, target, pid in order:
            rate = pump(target, frames[name], o.procs, o.secs, pid)
            rates[name].append(rate)
            print(f"  round {r + 1} {name:<16} {rate.line()}", flush=True)
            errors = answer_errors(api, rate.last_answers)
            if errors:
                # A rate of error answers (a member fenced, a session lapsed) measures
                # something else than the API: say so next to it.
                print(f"    ERRORS in the last answers of {name}: {errors}", flush=True)
    per_second = {name: [r.per_second for r in rs] for name, rs in rates.items()}
    print_ratios(targets, o, per_second)


def run_join(targets: list[tuple[str, Target, int]], o: Any) -> None:
    from minicoord.bench.lean_join import join_round

    times: dict[str, list[float]] = {name: [] for name, _, _ in targets}
    print(f"join: {o.join_size} members, {o.procs} load processes, first JoinGroup to all assigned")
    for r in range(o.rounds):
        order = targets if r % 2 == 0 else targets[::-1]
        for name, target, pid in order:
            result = join_round(target, o.join_size, o.procs, pid)
            times[name].append(result.ms if result.settled else float("inf"))
            print(f"  round {r + 1} {name:<16} {result.line()}", flush=True)
    print_ratios(targets, o, times, " (share of its time)")


def print_ratios(
    targets: list[tuple[str, Target, int]], o: Any, values: dict[str, list[float]], what: str = ""
) -> None:
    """Each target's per-round values over the peer's, and their median (with a peer)."""
    if not o.compare_bootstrap:
        return
    peer = values[o.compare_name]
    for name, _, _ in targets:
        if name == o.compare_name:
            continue
        ratios = [a / b for a, b in zip(values[name], peer, strict=True)]
        shown = " / ".join(f"{x:.2f}" for x in ratios)
        print(
            f"  {name} / {o.compare_name}{what}: median {statistics.median(ratios):.2f}"
            f" (rounds {shown})"
        )
