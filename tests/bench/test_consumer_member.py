"""The load generator's consumer-protocol member (KIP-848) against a real server process:
joining, sharing partitions, a member leaving, commits at the member epoch, a fenced member
rejoining, static members stepping out and back, and the describe-based settle check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from minicoord.clients.connection import ProtocolClient
from minicoord.clients.consumer_member import ConsumerProtocolMember, describe_group
from minicoord.clients.timings import Recorder
from minicoord.protocol.errors import ErrorCode
from minicoord.server.process import ServerProcess

TOPIC = "topic6"
WAIT_S = 10


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(
        configs={"group.consumer.heartbeat.interval.ms": 100}, topics=[(TOPIC, 6)]
    )


@pytest.fixture
async def conn(server: ServerProcess) -> AsyncIterator[ProtocolClient]:
    client = await ProtocolClient.connect("127.0.0.1", server.port, "cg-member-test")
    yield client
    await client.close()


async def until(predicate: Callable[[], object], what: str) -> None:
    for _ in range(int(WAIT_S / 0.02)):
        if await predicate():  # type: ignore[misc]
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def owned(members: list[ConsumerProtocolMember]) -> list[tuple[str, int]]:
    return sorted(p for m in members for p in m.owned())


async def settled(conn: ProtocolClient, group_id: str, members: int) -> bool:
    return (await describe_group(conn, group_id)).settled(members, 6)


async def test_three_members_share_six_partitions_and_one_leaving_hands_them_over(
    conn: ProtocolClient, group_id: str
) -> None:
    recorder = Recorder()
    members = [
        ConsumerProtocolMember(conn, group_id, [TOPIC], index=i, recorder=recorder)
        for i in range(3)
    ]
    for m in members:
        await m.join()
        m.start_heartbeats()
    try:

        async def three() -> bool:
            return await settled(conn, group_id, 3) and len(owned(members)) == 6

        await until(three, "three members to settle")
        # Every partition exactly once, two each (uniform assignor).
        assert owned(members) == [(TOPIC, p) for p in range(6)]
        assert sorted(len(m.owned()) for m in members) == [2, 2, 2]
        epochs = {m.generation for m in members}
        assert len(epochs) == 1 and epochs.pop() > 0

        # Commits carry the member epoch; a stale one is refused.
        first = members[0]
        mine = {tp: 42 for tp in first.owned()}
        assert set((await first.commit(mine)).values()) == {0}
        assert await first.fetch_offsets(list(mine)) == mine
        first.generation -= 1
        assert set((await first.commit(mine)).values()) == {ErrorCode.STALE_MEMBER_EPOCH}
        first.generation += 1

        assert await members[2].leave() == 0

        async def two() -> bool:
            return await settled(conn, group_id, 2) and len(owned(members[:2])) == 6

        await until(two, "the leaver's partitions to move")
        assert owned(members[:2]) == [(TOPIC, p) for p in range(6)]
        # Every assignment a member took was timed, and every heartbeat counted.
        assert len(recorder.select("phase", "rebalance")) >= 3
        assert recorder.select("request", "ConsumerGroupHeartbeat")
    finally:
        for m in members[:2]:
            await m.leave()


async def test_a_fenced_member_rejoins_under_its_own_id(
    conn: ProtocolClient, server: ServerProcess, group_id: str
) -> None:
    a = ConsumerProtocolMember(conn, group_id, [TOPIC], index=0)
    await a.join()
    epoch = a.generation
    # Another client with the same member id but a newer epoch would be a bug; what the
    # server does to a zombie is answer its old epoch FENCED_MEMBER_EPOCH.
    a.generation = epoch + 5
    assert await a.heartbeat() == ErrorCode.FENCED_MEMBER_EPOCH
    assert a.generation == 0 and a.owned() == []
    member_id = a.member_id
    await a.join()
    # Kafka 4.2 (KAFKA-19233): an existing member rejoining at epoch 0 keeps its state, and
    # the answer carries its current epoch and full assignment.
    assert a.member_id == member_id and a.generation == epoch
    assert len(a.owned()) == 6
    await a.leave()


async def test_a_leave_after_steady_heartbeats_is_a_leave(
    conn: ProtocolClient, group_id: str
) -> None:
    # Steady heartbeats go out as one frame encoded per epoch; the leave (epoch -1) that
    # follows them must not be sent as that frame (it once was, so members never left).
    a = ConsumerProtocolMember(conn, group_id, [TOPIC], index=0)
    await a.join()
    for _ in range(3):
        assert await a.heartbeat() == 0
    assert (await describe_group(conn, group_id)).member_epochs == (a.generation,)
    assert await a.leave() == 0
    assert (await describe_group(conn, group_id)).member_epochs == ()


async def test_a_static_member_steps_out_and_back_keeping_its_partitions(
    conn: ProtocolClient, group_id: str
) -> None:
    a = ConsumerProtocolMember(conn, group_id, [TOPIC], index=0, group_instance_id="i-a")
    b = ConsumerProtocolMember(conn, group_id, [TOPIC], index=1, group_instance_id="i-b")
    for m in (a, b):
        await m.join()
        m.start_heartbeats()
    try:

        async def both() -> bool:
            return await settled(conn, group_id, 2) and len(owned([a, b])) == 6

        await until(both, "two static members to settle")
        kept, epoch_b = a.owned(), b.generation
        assert await a.leave() == 0  # epoch -2: out for now, its partitions held for it
        again = ConsumerProtocolMember(conn, group_id, [TOPIC], index=2, group_instance_id="i-a")
        await again.join()
        assert again.owned() == kept
        # The other member saw nothing happen.
        assert b.generation == epoch_b and len(b.owned()) == 3
        await again.leave()
    finally:
        await b.leave()


async def test_describe_reports_an_unknown_group(conn: ProtocolClient) -> None:
    snapshot = await describe_group(conn, "no-such-group")
    assert snapshot.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert not snapshot.settled(0, 0)
