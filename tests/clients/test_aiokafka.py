"""aiokafka consumers and admin client against a real minicoord process.

The members share the test's event loop; each has a task calling `getmany` as an application
would (aiokafka's coordinator runs on its own tasks). The member killed without a LeaveGroup
runs in a child process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocol
from aiokafka.errors import IllegalStateError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from clientkit import (
    ALL,
    HEARTBEAT_MS,
    KILL_SESSION_MS,
    METADATA_MAX_AGE_MS,
    SESSION_MS,
    TOPIC,
    assert_exact_cover,
    async_wait_log,
    async_wait_until,
    generations,
    group_lines,
    is_exact_cover,
    stable_generations,
    stable_with,
)

pytestmark = pytest.mark.clients

# No single client call may hang a test: each is awaited with this bound.
CALL_TIMEOUT_S = 20


async def bounded(awaitable: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


class Member(ConsumerRebalanceListener):
    """One AIOKafkaConsumer and the task polling it; records its rebalance callbacks."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group: str,
        *,
        instance_id: str | None = None,
        session_ms: int = SESSION_MS,
    ) -> None:
        self.name = name
        self.events: list[tuple[str, frozenset[int]]] = []
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            group_instance_id=instance_id,
            client_id=name,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            metadata_max_age_ms=METADATA_MAX_AGE_MS,
            fetch_max_wait_ms=100,
        )
        self.closed = False
        self.error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Member:
        await bounded(self.consumer.start())
        self.consumer.subscribe([TOPIC], listener=self)
        self._task = asyncio.create_task(self._run(), name=self.name)
        return self

    async def _run(self) -> None:
        try:
            while True:
                await self.consumer.getmany(timeout_ms=100)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaced by the test through `error`
            self.error = exc

    # -- ConsumerRebalanceListener --------------------------------------------------------------

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoke", frozenset(tp.partition for tp in revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assign", frozenset(tp.partition for tp in assigned)))

    @property
    def assignment(self) -> frozenset[int]:
        if self.closed:
            return frozenset()
        assert all(tp.topic == TOPIC for tp in self.consumer.assignment())
        return frozenset(tp.partition for tp in self.consumer.assignment())

    @property
    def member_id(self) -> str:
        # aiokafka has no public accessor for the id the coordinator gave this member.
        return str(self.consumer._coordinator.member_id)

    async def stop(self) -> None:
        """AIOKafkaConsumer.stop(): sends LeaveGroup unless the member is static."""
        if self.closed:
            return
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await bounded(self._task)
        await bounded(self.consumer.stop())


class Members:
    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.all: list[Member] = []

    async def add(self, **kwargs: Any) -> Member:
        member = Member(f"aio-{len(self.all)}", self.bootstrap, self.group, **kwargs)
        self.all.append(member)
        return await member.start()

    async def add_many(self, n: int, **kwargs: Any) -> list[Member]:
        return [await self.add(**kwargs) for _ in range(n)]

    def describe(self) -> str:
        return "; ".join(
            f"{m.name}{'(closed)' if m.closed else ''}={sorted(m.assignment)} "
            f"events={[(k, sorted(p)) for k, p in m.events[-4:]]} error={m.error!r}"
            for m in self.all
        )

    def check_tasks(self) -> None:
        for m in self.all:
            assert m.error is None, f"{m.name} failed: {m.error!r}"

    async def wait_cover(self, members: list[Member], timeout: float = 30) -> None:
        each = len(ALL) // len(members)

        def done() -> bool:
            self.check_tasks()
            sets = [m.assignment for m in members]
            return is_exact_cover(sets) and all(len(s) == each for s in sets)

        await async_wait_until(
            done, timeout, describe=self.describe, what=f"{len(members)} members to cover {TOPIC}"
        )

    async def stop_all(self) -> None:
        for member in self.all:
            await member.stop()


@pytest.fixture
async def members(server: Any, group_id: str) -> AsyncIterator[Members]:
    group = Members(server.bootstrap, group_id)
    yield group
    await group.stop_all()


@pytest.fixture
async def admin(server: Any) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="aio-admin")
    await bounded(client.start())
    yield client
    await bounded(client.close())


def owned(members: list[Member]) -> dict[str, frozenset[int]]:
    return {m.name: m.assignment for m in members}


async def test_three_members_get_disjoint_complete_assignments(
    server: Any, members: Members, group_id: str
) -> None:
    trio = await members.add_many(3)
    await members.wait_cover(trio)
    assert_exact_cover(owned(trio), each=2)
    # aiokafka's default assignor is round robin: one 6-partition topic over 3 members.
    assert sorted(sorted(m.assignment) for m in trio) == [[0, 3], [1, 4], [2, 5]]
    assert len({m.member_id for m in trio}) == 3
    log = await async_wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    assert generations(log, group_id)[-1][1] == 3
    assert stable_generations(log, group_id)[-1][0] == generations(log, group_id)[-1][0]
    assert "protocol roundrobin" in group_lines(log, group_id, "members, protocol")[-1]


async def test_member_leaving_hands_its_partitions_to_the_others(
    server: Any, members: Members, group_id: str
) -> None:
    trio = await members.add_many(3)
    await members.wait_cover(trio)
    leaver = trio[2]
    leaver_id = leaver.member_id
    await leaver.stop()
    rest = trio[:2]
    await members.wait_cover(rest, timeout=20)
    assert_exact_cover(owned(rest), each=3)
    log = await async_wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    assert group_lines(log, group_id, f"member {leaver_id} left")
    assert not group_lines(log, group_id, "session timed out")
    assert generations(log, group_id)[-1][1] == 2


async def test_killed_member_is_evicted_after_session_timeout(
    server: Any, members: Members, group_id: str, child_member: Callable[..., Any]
) -> None:
    pair = await members.add_many(2)
    await members.wait_cover(pair)
    child = child_member(
        "aiokafka",
        server.bootstrap,
        group_id,
        session_ms=KILL_SESSION_MS,
        heartbeat_ms=HEARTBEAT_MS,
    )

    def child_in() -> bool:
        members.check_tasks()
        sets = [m.assignment for m in pair] + [child.assignment]
        return is_exact_cover(sets) and all(len(s) == 2 for s in sets)

    await async_wait_until(
        child_in,
        30,
        describe=lambda: members.describe() + " | " + child.describe(),
        what="the child to join",
    )
    child_id = child.member_id
    assert child_id
    child.kill()
    killed_at = time.monotonic()
    await members.wait_cover(pair, timeout=KILL_SESSION_MS / 1000 + 20)
    elapsed = time.monotonic() - killed_at
    assert_exact_cover(owned(pair), each=3)
    log = await async_wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    assert group_lines(log, group_id, f"member {child_id} session timed out after")
    assert not group_lines(log, group_id, " left")
    # Evicted only once its session lapsed (its last heartbeat came shortly before the kill;
    # the bound leaves room for a heartbeat delayed by a busy machine).
    assert elapsed >= KILL_SESSION_MS / 2000, elapsed
    assert generations(log, group_id)[-1][1] == 2


async def test_commit_and_committed_round_trip(
    server: Any, members: Members, group_id: str, admin: AIOKafkaAdminClient
) -> None:
    trio = await members.add_many(3)
    await members.wait_cover(trio)
    for member in trio:
        mine = sorted(member.assignment)
        await bounded(
            member.consumer.commit(
                {
                    TopicPartition(TOPIC, p): OffsetAndMetadata(100 + 7 * p, f"meta-{p}")
                    for p in mine
                }
            )
        )
        # aiokafka itself refuses to commit partitions the member does not own.
        foreign = min(ALL - member.assignment)
        with pytest.raises(IllegalStateError):
            await bounded(
                member.consumer.commit({TopicPartition(TOPIC, foreign): OffsetAndMetadata(1, "")})
            )
    for member in trio:
        got = [
            await bounded(member.consumer.committed(TopicPartition(TOPIC, p))) for p in sorted(ALL)
        ]
        assert got == [100 + 7 * p for p in sorted(ALL)]
    # committed() returns only the offset; the admin client shows the metadata too.
    offsets = await bounded(admin.list_consumer_group_offsets(group_id))
    assert {tp: (o.offset, o.metadata) for tp, o in offsets.items()} == {
        TopicPartition(TOPIC, p): (100 + 7 * p, f"meta-{p}") for p in sorted(ALL)
    }
    # Another group has committed nothing.
    other = AIOKafkaConsumer(
        bootstrap_servers=server.bootstrap, group_id=group_id + "-other", enable_auto_commit=False
    )
    await bounded(other.start())
    try:
        got = [await bounded(other.committed(TopicPartition(TOPIC, p))) for p in sorted(ALL)]
    finally:
        await bounded(other.stop())
    assert got == [None] * len(ALL)
    assert await bounded(admin.list_consumer_group_offsets(group_id + "-other")) == {}


async def test_static_member_restart_keeps_partitions_without_rebalance(
    server: Any, members: Members, group_id: str
) -> None:
    trio = [await members.add(instance_id=f"static-{i}") for i in range(3)]
    await members.wait_cover(trio)
    await asyncio.sleep(0.5)
    log = await async_wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    gens = generations(log, group_id)
    assert gens[-1][1] == 3
    leader_line = group_lines(log, group_id, f"generation {gens[-1][0]} with")[-1]
    # Restart the leader: the hardest case (it must not reassign a Stable group).
    restarted = next(m for m in trio if m.member_id in leader_line)
    others = [m for m in trio if m is not restarted]
    kept = restarted.assignment
    events_before = {m.name: list(m.events) for m in others}
    old_id = restarted.member_id
    await restarted.stop()  # static: aiokafka sends no LeaveGroup
    replacement = await members.add(instance_id=f"static-{trio.index(restarted)}")
    await async_wait_until(
        lambda: replacement.assignment == kept,
        SESSION_MS / 1000 - 1,
        describe=members.describe,
        what="the restarted static member to get its partitions back",
    )
    assert replacement.member_id != old_id
    replaced = f"static member {replacement.member_id} replaced {old_id}"
    await async_wait_log(
        server, lambda log: bool(group_lines(log, group_id, replaced)), what=replaced
    )
    await asyncio.sleep(2.0)  # several heartbeat intervals: a rebalance would show by now
    members.check_tasks()
    log = server.log
    assert generations(log, group_id) == gens, "a new generation was handed out"
    assert not group_lines(log, group_id, f"member {old_id} left")
    for m in others:
        assert m.events == events_before[m.name], f"{m.name} saw a rebalance: {m.events}"
    assert_exact_cover(owned([*others, replacement]), each=2)
    assert [e for e in replacement.events if e[1]] == [("assign", kept)]


async def test_describe_consumer_groups(
    server: Any, members: Members, group_id: str, admin: AIOKafkaAdminClient
) -> None:
    trio = await members.add_many(3)
    await members.wait_cover(trio)

    async def describe() -> Any:
        (response,) = await bounded(admin.describe_consumer_groups([group_id]))
        (group,) = response.groups
        return group

    group = await async_wait_until(
        lambda: _stable(describe()), 15, interval=0.2, what="DescribeGroups to say Stable"
    )
    error_code, gid, state, protocol_type, protocol, described = group[:6]
    assert (error_code, gid, state, protocol_type, protocol) == (
        0,
        group_id,
        "Stable",
        "consumer",
        "roundrobin",
    )
    assert len(described) == 3
    by_id = {d[0]: d for d in described}
    assert set(by_id) == {m.member_id for m in trio}
    for m in trio:
        _, client_id, client_host, metadata, assignment = by_id[m.member_id][:5]
        assert client_id == m.name
        assert client_host.lstrip("/") == "127.0.0.1"
        assert ConsumerProtocol.METADATA.decode(metadata).subscription == [TOPIC]
        decoded = ConsumerProtocol.ASSIGNMENT.decode(assignment)
        assert {(t, p) for t, parts in decoded.assignment for p in parts} == {
            (TOPIC, p) for p in m.assignment
        }
    (missing_response,) = await bounded(admin.describe_consumer_groups([group_id + "-missing"]))
    (missing,) = missing_response.groups
    assert missing[:3] == (0, group_id + "-missing", "Dead")
    assert list(missing[5]) == []


async def _stable(pending: Any) -> Any:
    group = await pending
    return group if group[2] == "Stable" else None


async def test_list_consumer_groups(
    server: Any, members: Members, group_id: str, admin: AIOKafkaAdminClient
) -> None:
    await members.wait_cover(await members.add_many(3))
    listed = await bounded(admin.list_consumer_groups())
    assert (group_id, "consumer") in [tuple(g[:2]) for g in listed]
    await members.stop_all()
    # Still listed once everyone has left (an Empty group keeps its offsets and id).
    listed = await bounded(admin.list_consumer_groups())
    assert group_id in [g[0] for g in listed]
