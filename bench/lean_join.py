"""`minicoord bench lean --api join`: how long a classic group of `--join-size` members takes
to settle, from the first JoinGroup sent to every member holding an assignment of a
generation of that size, against minicoord and a peer in one run.

The Spark scenario `join-scaling` measures the same through full clients (kafka-python's
codec, a task's event loop shared by hundreds of members); this client is lean enough to leave
the server as the limit. Each member is one connection and a small state machine fed by its
answers: frames packed by hand in librdkafka's versions (JoinGroup v5, SyncGroup v3,
Heartbeat v3, LeaveGroup v3), answers read by offset, no per-request objects. Members are
split across `--procs` processes, which connect first and then start on one instant of the
system-wide monotonic clock.

A member that settled heartbeats every `HEARTBEAT_MS`: a server that starts another
generation after everyone held an assignment (kfake may: the first members in a generation of
their own) tells them so, and they rejoin. A round ends once every member is settled and has
had a heartbeat answered without error since; its time is the last settle's. The server's CPU
is read when the parent sees every process settled (again, after a later generation), each
process's own CPU at its last settle.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from minicoord.bench.pump import SPAWN, Target, own_cpu, receive, server_cpu

JOIN_VERSION, SYNC_VERSION, HEARTBEAT_VERSION, LEAVE_VERSION = 5, 3, 3, 3
SESSION_TIMEOUT_MS = 30_000
REBALANCE_TIMEOUT_MS = 60_000
HEARTBEAT_MS = 500
RETRY_S = 0.1  # after a retriable JoinGroup error (kfake: joins racing a rebalance)
STATUS_POLL_S = 0.01
ROUND_TIMEOUT_S = 120.0

# The error codes this client tells apart; any other sends the member back to JoinGroup
# (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION) or has it retry shortly (a join refused).
NONE, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED = 0, 25, 79

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_NULL = b"\xff\xff"  # a null string: group_instance_id, dynamic members only
_ERROR = struct.Struct(">ih")  # throttle_time_ms, error_code: how every answer here opens
_JOINED = struct.Struct(">ihi")  # throttle_time_ms, error_code, generation_id


def _s(text: bytes) -> bytes:
    return _I16.pack(len(text)) + text


def _b(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def _frame(api_key: int, version: int, client_id: bytes, body: bytes) -> bytes:
    # Header v1 (these versions are not flexible); the correlation id is not checked, as a
    # member has one request in flight.
    data = struct.pack(">hhi", api_key, version, 0) + _s(client_id) + body
    return _I32.pack(len(data)) + data


def _read(buf: bytes, pos: int, length: struct.Struct = _I16) -> tuple[bytes, int]:
    """A string (int16 length) or, with `_I32`, bytes; null reads as empty."""
    (n,) = length.unpack_from(buf, pos)
    pos += length.size
    if n < 0:
        return b"", pos
    return buf[pos : pos + n], pos + n


def subscription(topic: bytes) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    return _I16.pack(0) + _I32.pack(1) + _s(topic) + _I32.pack(-1)


def assignment(topic: bytes, partitions: Sequence[int], group_size: int) -> bytes:
    """ConsumerProtocolAssignment v0 whose user data is the generation's size, as the Spark
    scenario's leader writes it (clients/member.py): a member knows from its own answer
    whether it is in the full group."""
    owned = _I32.pack(len(partitions)) + b"".join(_I32.pack(p) for p in partitions)
    return _I16.pack(0) + _I32.pack(1) + _s(topic) + owned + _b(_I32.pack(group_size))


def assigned_group_size(data: bytes) -> int:
    """The generation size an `assignment` carries; 0 when it carries none."""
    pos = 2
    (topics,) = _I32.unpack_from(data, pos)
    pos += 4
    for _ in range(topics):
        _, pos = _read(data, pos)
        (n,) = _I32.unpack_from(data, pos)
        pos += 4 + 4 * n
    user_data, _ = _read(data, pos, _I32)
    return _I32.unpack(user_data)[0] if len(user_data) == 4 else 0


def join_body(group: bytes, member_id: bytes, metadata: bytes) -> bytes:
    return (
        _s(group)
        + struct.pack(">ii", SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS)
        + _s(member_id)
        + _NULL
        + _s(b"consumer")
        + _I32.pack(1)
        + _s(b"range")
        + _b(metadata)
    )


def sync_body(
    group: bytes, generation: int, member_id: bytes, assignments: Sequence[tuple[bytes, bytes]]
) -> bytes:
    parts = [_s(group), _I32.pack(generation), _s(member_id), _NULL, _I32.pack(len(assignments))]
    parts += [_s(m) + _b(a) for m, a in assignments]
    return b"".join(parts)


def heartbeat_body(group: bytes, generation: int, member_id: bytes) -> bytes:
    return _s(group) + _I32.pack(generation) + _s(member_id) + _NULL


def leave_body(group: bytes, member_ids: Sequence[bytes]) -> bytes:
    return _s(group) + _I32.pack(len(member_ids)) + b"".join(_s(m) + _NULL for m in member_ids)


@dataclass(frozen=True)
class Joined:
    """A JoinGroup v5 answer, as far as a member needs it."""

    error: int
    generation: int
    leader: bytes
    member_id: bytes
    members: list[bytes]  # the leader's: every member id of the generation


def parse_join(body: bytes) -> Joined:
    _, error, generation = _JOINED.unpack_from(body, 0)
    _, pos = _read(body, _JOINED.size)  # protocol name
    leader, pos = _read(body, pos)
    member_id, pos = _read(body, pos)
    (count,) = _I32.unpack_from(body, pos)
    pos += 4
    members = []
    for _ in range(max(0, count)):
        mid, pos = _read(body, pos)
        _, pos = _read(body, pos)  # group_instance_id
        _, pos = _read(body, pos, _I32)  # metadata: every member subscribes to the one topic
        members.append(mid)
    return Joined(error, generation, leader, member_id, members)


def plan(topic: bytes, partitions: int, members: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
    """Round-robin over the sorted member ids, each assignment naming the group's size."""
    ordered = sorted(members)
    owned: list[list[int]] = [[] for _ in ordered]
    for p in range(partitions):
        owned[p % len(ordered)].append(p)
    return [(m, assignment(topic, o, len(ordered))) for m, o in zip(ordered, owned, strict=True)]


class Round:
    """One process's members in one round: what they share and what the parent is told."""

    def __init__(self, group: bytes, size: int, topic: bytes, partitions: int) -> None:
        self.group, self.size, self.topic, self.partitions = group, size, topic, partitions
        self.metadata = subscription(topic)
        self.members: list[JoinMember] = []
        self.joins = 0  # JoinGroup requests sent
        self.stopping = False  # the round is over: no more heartbeats
        self.errors: dict[int, int] = {}

    def settled(self) -> bool:
        return all(m.settled_at for m in self.members)

    def confirmed(self) -> bool:
        return all(m.settled_at and m.confirmed for m in self.members)

    def last_settle(self) -> float:
        return max(m.settled_at for m in self.members)


class JoinMember(asyncio.Protocol):
    """A classic member on its own connection: join, sync, heartbeat; rejoin when told."""

    def __init__(self, r: Round, index: int) -> None:
        self.r = r
        self.client_id = f"lean-join-{index}".encode()
        self.member_id = b""
        self.generation = -1
        self.settled_at = 0.0
        self.confirmed = False  # a heartbeat answered without error since the settle
        self.state = ""
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send(self, api_key: int, version: int, body: bytes, state: str) -> None:
        self.state = state
        self.transport.write(_frame(api_key, version, self.client_id, body))

    def join(self) -> None:
        self.settled_at, self.confirmed = 0.0, False
        self.r.joins += 1
        self.send(
            11, JOIN_VERSION, join_body(self.r.group, self.member_id, self.r.metadata), "join"
        )

    def heartbeat(self) -> None:
        if self.state == "idle" and not self.r.stopping:
            body = heartbeat_body(self.r.group, self.generation, self.member_id)
            self.send(12, HEARTBEAT_VERSION, body, "heartbeat")

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        while len(buf) >= 4:
            (size,) = _I32.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                break
            body, buf = buf[8 : 4 + size], buf[4 + size :]  # past the correlation id
            self.answer(body)
        self.buf = buf

    def answer(self, body: bytes) -> None:
        state, self.state = self.state, "idle"
        error = _ERROR.unpack_from(body, 0)[1]
        if error:
            self.r.errors[error] = self.r.errors.get(error, 0) + 1
        loop = asyncio.get_running_loop()
        if state == "join":
            self.joined(parse_join(body), loop)
        elif state == "sync":
            self.synced(error, body, loop)
        elif state == "heartbeat":
            if error == NONE:
                self.confirmed = True
                loop.call_later(HEARTBEAT_MS / 1000, self.heartbeat)
            else:
                self.rejoin(error)

    def joined(self, j: Joined, loop: asyncio.AbstractEventLoop) -> None:
        if j.error == MEMBER_ID_REQUIRED:
            self.member_id = j.member_id
            self.join()
        elif j.error == UNKNOWN_MEMBER_ID:
            self.member_id = b""
            self.join()
        elif j.error:
            loop.call_later(RETRY_S, self.join)
        else:
            self.member_id, self.generation = j.member_id, j.generation
            assignments: list[tuple[bytes, bytes]] = []
            if j.leader == j.member_id:
                assignments = plan(self.r.topic, self.r.partitions, j.members)
            body = sync_body(self.r.group, j.generation, j.member_id, assignments)
            self.send(14, SYNC_VERSION, body, "sync")

    def synced(self, error: int, body: bytes, loop: asyncio.AbstractEventLoop) -> None:
        if error:
            self.rejoin(error)
            return
        data, _ = _read(body, _ERROR.size, _I32)
        if data and assigned_group_size(data) == self.r.size:
            self.settled_at = time.monotonic()
        # Not the full group yet: the heartbeat hears of the next generation.
        loop.call_later(HEARTBEAT_MS / 1000, self.heartbeat)

    def rejoin(self, error: int) -> None:
        if error == UNKNOWN_MEMBER_ID:
            self.member_id = b""
        self.join()


def _worker(
    proc: int,
    target: Target,
    group: str,
    size: int,
    indices: list[int],
    partitions: int,
    out: Any,
    go: Any,
    start_at: Any,
    stop: Any,
) -> None:
    import uvloop

    async def run() -> None:
        loop = asyncio.get_running_loop()
        r = Round(group.encode(), size, b"bench", partitions)
        for i in indices:
            _, member = await loop.create_connection(
                lambda i=i: JoinMember(r, i), target.host, target.port
            )
            r.members.append(member)
        out.put(("ready", proc))
        while not go.wait(0.001):
            await asyncio.sleep(0)
        await asyncio.sleep(max(0.0, start_at.value - time.monotonic()))
        cpu0, first = own_cpu(), time.monotonic()
        for member in r.members:
            member.join()
        cpu_settled, told = 0.0, (False, False)
        deadline = first + ROUND_TIMEOUT_S
        while not stop.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(STATUS_POLL_S)
            now = (r.settled(), r.confirmed())
            if now[0] and not told[0]:
                cpu_settled = own_cpu()
            if now != told:
                out.put(("status", proc, *now))
                told = now
        r.stopping = True
        settled = r.settled()
        last = r.last_settle() if settled else 0.0
        # Leave together, from one connection: the group is gone before the next round.
        leaver = r.members[0]
        ids = [m.member_id for m in r.members if m.member_id]
        for _ in range(200):
            if leaver.state == "idle":
                break
            await asyncio.sleep(0.005)
        if ids and leaver.state == "idle":
            leaver.send(13, LEAVE_VERSION, leave_body(r.group, ids), "leave")
            for _ in range(200):
                if leaver.state == "idle":
                    break
                await asyncio.sleep(0.005)
        for member in r.members:
            member.transport.close()
        busy = (cpu_settled - cpu0) / (last - first) if settled and last > first else 0.0
        out.put(("done", proc, settled, first, last, busy, r.joins, dict(r.errors)))

    uvloop.run(run())


def _collect(
    out: Any, workers: Sequence[Any], kind: str, timeout_s: float, got: dict[int, Any]
) -> dict[int, Any]:
    """The `kind` message of every process (by its index; `got` holds those already read),
    statuses skipped."""
    deadline = time.monotonic() + timeout_s
    while len(got) < len(workers):
        message = receive(out, workers, deadline, "join")
        if message[0] == kind:
            got[message[1]] = message[2:]
    return got


@dataclass(frozen=True)
class JoinTime:
    settled: bool
    ms: float  # first JoinGroup sent to the last member settled
    client_cpu: list[float]  # cores, per load process, up to its last settle
    server_cpu_ms: float  # 0.0 without a pid
    joins_per_member: float
    errors: dict[int, int]

    def line(self) -> str:
        if not self.settled:
            return "did not settle"
        clients = ", ".join(f"{c:.2f}" for c in self.client_cpu)
        server = (
            f"server {self.server_cpu_ms:,.0f} ms CPU" if self.server_cpu_ms else "server CPU -"
        )
        errors = ", ".join(f"{k}:{v}" for k, v in sorted(self.errors.items()))
        return (
            f"{self.ms:>8,.1f} ms   client CPU per process [{clients}]   {server}   "
            f"JoinGroups per member {self.joins_per_member:.2f}   error answers {{{errors}}}"
        )


def join_round(
    target: Target, size: int, procs: int, pid: int = 0, partitions: int = 64
) -> JoinTime:
    """One group of `size` members on `target`, from nothing to settled."""
    group = f"lean-join-{time.monotonic_ns()}"
    out: Any = SPAWN.Queue()
    go, stop = SPAWN.Event(), SPAWN.Event()
    start_at = SPAWN.Value("d", 0.0)
    members = list(range(size))
    workers = [
        SPAWN.Process(
            target=_worker,
            args=(i, target, group, size, members[i::procs], partitions, out, go, start_at, stop),
        )
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    try:
        _collect(out, workers, "ready", 120, {})
        server0 = server_cpu(pid) if pid else 0.0
        start_at.value = time.monotonic() + 0.05
        go.set()
        status: dict[int, tuple[bool, bool]] = {}
        done: dict[int, Any] = {}  # a process past its own deadline reports before it is told
        server_at_settle = 0.0
        all_settled = False
        deadline = time.monotonic() + ROUND_TIMEOUT_S + 10
        while True:
            message = receive(out, workers, deadline, "join")
            if message[0] == "done":
                done[message[1]] = message[2:]
                break
            status[message[1]] = message[2:]
            whole = len(status) == procs
            settled_now = whole and all(s for s, _ in status.values())
            if settled_now and not all_settled and pid:
                # Read again if a later generation unsettled them: the last settle counts.
                server_at_settle = server_cpu(pid)
            all_settled = settled_now
            if whole and all(c for _, c in status.values()):
                break
        stop.set()
        done = _collect(out, workers, "done", 60, done)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
            if w.is_alive():
                w.kill()
    ok = all(d[0] for d in done.values())
    first = min(d[1] for d in done.values())
    last = max(d[2] for d in done.values())
    errors: dict[int, int] = {}
    for d in done.values():
        for code, n in d[5].items():
            errors[code] = errors.get(code, 0) + n
    return JoinTime(
        ok,
        (last - first) * 1000 if ok else 0.0,
        [done[i][3] for i in sorted(done)],
        (server_at_settle - server0) * 1000 if server_at_settle else 0.0,
        sum(d[4] for d in done.values()) / size,
        errors,
    )
