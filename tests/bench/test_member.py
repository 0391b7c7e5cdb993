"""The load generator's simulated member against a real minicoord server process.

These drive `GroupMember` directly (no Spark): join, a rebalance when a second member
arrives, commit + fetch, leave, static membership, shared connections; and the assignors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from minicoord.clients.assignors import range_assign, roundrobin_assign
from minicoord.clients.connection import ProtocolClient
from minicoord.clients.member import GroupMember, decode_assignment, encode_assignment
from minicoord.clients.timings import Recorder
from minicoord.protocol.errors import ErrorCode
from minicoord.server.process import ServerProcess

TOPIC = "topic6"
ALL = {(TOPIC, p) for p in range(6)}
WAIT_S = 10


@pytest.fixture
async def connect(kafka_server: ServerProcess) -> AsyncIterator[Callable]:
    opened: list[ProtocolClient] = []

    async def factory() -> ProtocolClient:
        conn = await ProtocolClient.connect("127.0.0.1", kafka_server.port, "member-test")
        opened.append(conn)
        return conn

    yield factory
    for conn in opened:
        await conn.close()


def member(conn: ProtocolClient, group_id: str, index: int, **kw: object) -> GroupMember:
    kw.setdefault("heartbeat_interval_ms", 50)
    kw.setdefault("session_timeout_ms", 6000)
    return GroupMember(conn, group_id, [TOPIC], index=index, **kw)  # type: ignore[arg-type]


async def until(predicate: Callable[[], bool], what: str) -> None:
    for _ in range(int(WAIT_S / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_single_member_joins_and_gets_every_partition(
    connect: Callable, group_id: str
) -> None:
    recorder = Recorder()
    m = member(await connect(), group_id, 0, recorder=recorder)
    node, host, port = await m.find_coordinator()
    assert (node, host) == (0, "127.0.0.1") and port > 0
    assignment = await m.join()
    assert set(m.owned()) == ALL and assignment == {TOPIC: list(range(6))}
    assert m.generation == 1 and m.group_size == 1 and m.leader_id == m.member_id
    # The two-step join: MEMBER_ID_REQUIRED, then the rejoin with the id we were given.
    joins = recorder.select("request", "JoinGroup")
    assert [j.error for j in joins] == [ErrorCode.MEMBER_ID_REQUIRED, 0]
    assert all(r.latency_ms >= 0 and r.end >= r.start for r in recorder.rows())
    (phase,) = recorder.select("phase", "rebalance")
    assert phase.generation == 1 and phase.group_size == 1 and phase.value == 2
    assert await m.heartbeat() == 0
    assert await m.leave() == 0


async def test_second_member_triggers_a_rebalance_with_disjoint_complete_assignment(
    connect: Callable, group_id: str
) -> None:
    first = member(await connect(), group_id, 0)
    await first.join()
    first.start_heartbeats()
    second = member(await connect(), group_id, 1, assignor="range")
    # The first member learns of the rebalance from its heartbeat and rejoins.
    await asyncio.wait_for(second.join(), WAIT_S)
    second.start_heartbeats()
    await until(lambda: first.generation == second.generation == 2, "both in generation 2")
    await until(lambda: first.group_size == second.group_size == 2, "assignments of size 2")
    owned_a, owned_b = set(first.owned()), set(second.owned())
    assert owned_a | owned_b == ALL and not owned_a & owned_b
    assert len(owned_a) == len(owned_b) == 3
    assert first.rounds == 2 and second.rounds == 1
    await second.leave()
    # After the leave, the remaining member gets everything back.
    await until(lambda: first.generation == 3 and set(first.owned()) == ALL, "reassignment")
    await first.leave()


async def test_commit_then_fetch_returns_the_committed_offsets(
    connect: Callable, group_id: str
) -> None:
    m = member(await connect(), group_id, 0)
    await m.join()
    offsets = {tp: 100 + tp[1] for tp in m.owned()}
    errors = await m.commit(offsets, metadata="bench")
    assert errors == dict.fromkeys(offsets, 0)
    other = member(await connect(), group_id, 1)  # any client may fetch a group's offsets
    assert await other.fetch_offsets(sorted(offsets)) == offsets
    # A commit from a stale generation is refused.
    m.generation -= 1
    stale = await m.commit({(TOPIC, 0): 1})
    assert stale == {(TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
    m.generation += 1
    assert await m.leave() == 0
    # After leaving: still committed; the member id is forgotten and heartbeats are refused.
    assert await other.fetch_offsets([(TOPIC, 0)]) == {(TOPIC, 0): 100}


async def test_static_members_skip_the_member_id_step(connect: Callable, group_id: str) -> None:
    recorder = Recorder()
    a = member(await connect(), group_id, 0, group_instance_id="a", recorder=recorder)
    b = member(await connect(), group_id, 1, group_instance_id="b", recorder=recorder)
    a.assignor = b.assignor = "roundrobin"
    await asyncio.wait_for(asyncio.gather(a.join(), b.join()), WAIT_S)
    a.start_heartbeats()
    b.start_heartbeats()
    await until(lambda: a.group_size == b.group_size == 2, "both assigned in one generation")
    assert set(a.owned()) | set(b.owned()) == ALL
    assert not set(a.owned()) & set(b.owned())
    assert ErrorCode.MEMBER_ID_REQUIRED not in {r.error for r in recorder.select("request")}
    assert await a.leave() == 0 and await b.leave() == 0


async def test_members_sharing_one_connection_heartbeat_and_commit(
    connect: Callable, group_id: str
) -> None:
    conn = await connect()
    members = [member(conn, group_id, i) for i in range(4)]
    # Known partition counts: no leader needs a Metadata answer queued behind parked joins.
    for m in members:
        m.partitions[TOPIC] = 6
    # Sent in one turn of the loop: every first JoinGroup is in before any rejoin, so the
    # group forms in one round even through one in-order connection.
    await asyncio.wait_for(asyncio.gather(*(m.join() for m in members)), WAIT_S)
    assert {m.generation for m in members} == {1} and {m.group_size for m in members} == {4}
    owned = [set(m.owned()) for m in members]
    assert set().union(*owned) == ALL and sum(map(len, owned)) == 6
    assert await asyncio.gather(*(m.heartbeat() for m in members)) == [0, 0, 0, 0]
    leader = next(m for m in members if m.owned())
    assert set((await leader.commit(dict.fromkeys(leader.owned(), 5))).values()) == {0}
    await asyncio.gather(*(m.leave() for m in members))


def test_assignors_match_kafkas() -> None:
    subs = {"b": ["t", "u"], "a": ["t"], "c": ["u"]}
    counts = {"t": 5, "u": 2}
    assert range_assign(subs, counts) == {
        "a": {"t": [0, 1, 2]},
        "b": {"t": [3, 4], "u": [0]},
        "c": {"u": [1]},
    }
    rr = roundrobin_assign({"a": ["t"], "b": ["t"]}, {"t": 5})
    assert rr == {"a": {"t": [0, 2, 4]}, "b": {"t": [1, 3]}}
    data = encode_assignment({"t": [1, 2]}, 7)
    assert decode_assignment(data) == ({"t": [1, 2]}, 7)
    assert decode_assignment(b"") == ({}, 0)
