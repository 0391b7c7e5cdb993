"""kafkajs (2.x, npm) consumers against a real minicoord process.

Each member is a stock `kafka.consumer()` in its own Node process (node/member.mjs) with the
default assigner, kafkajs' RoundRobinAssigner: members sorted by id, partition i to member
i mod n. The assignments are checked three ways: what each member says it got, what the
coordinator holds (DescribeGroups), and what that assigner must produce from the member ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from matrixkit import (
    ALL,
    assert_exact_cover,
    committed_offsets,
    last_generation,
    owned,
    roundrobin_assignment,
    wait_settled,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("node_clients")]

CLIENT = "kafkajs"
PROTOCOL = "RoundRobinAssigner"


def start_members(spawn: Any, group: str, n: int) -> list[Any]:
    return [spawn.node(CLIENT, group, client_id=f"kafkajs-{i}") for i in range(n)]


def test_three_members_split_the_topic_and_rebalance_when_one_leaves(
    server: Any, spawn: Any, group_id: str
) -> None:
    trio = start_members(spawn, group_id, 3)
    view = wait_settled(server, group_id, trio)
    assert view.protocol == PROTOCOL
    assert_exact_cover(owned(trio))
    assert owned(trio) == roundrobin_assignment(m.member_id for m in trio)
    before = last_generation(server, group_id, 3, PROTOCOL)[0]

    leaver, rest = trio[0], trio[1:]
    assert leaver.leave() == 0
    assert leaver.snapshot()[-1]["event"] == "closed", leaver.describe()

    view = wait_settled(server, group_id, rest)
    assert_exact_cover(owned(rest))
    assert owned(rest) == roundrobin_assignment(m.member_id for m in rest)
    assert all(len(m.assignment) == 3 for m in rest)
    wait_until(
        lambda: f"member {leaver.member_id} left" in server.log,
        10,
        what="the coordinator's log of the leave",
    )
    generation = last_generation(server, group_id, 2, PROTOCOL)[0]
    assert generation > before
    # Each survivor gave its partitions up and was handed three.
    for member in rest:
        kinds = [e["event"] for e in member.snapshot()]
        assert "revoked" in kinds and kinds[-1] == "assigned", member.describe()
    assert not any(m.errors() for m in trio), [m.describe() for m in trio]


def test_members_commit_offsets_before_and_after_a_rebalance(
    server: Any, spawn: Any, group_id: str
) -> None:
    trio = start_members(spawn, group_id, 3)
    wait_settled(server, group_id, trio)
    assert committed_offsets(server.bootstrap, group_id) == dict.fromkeys(ALL)

    # consumer.commitOffsets() of each member's own partitions, at generation N. Offset 0, the
    # end of these empty partitions: after the rebalance below each survivor resumes its new
    # partitions from their committed offsets, and at an offset past the end kafkajs' fetch gets
    # OFFSET_OUT_OF_RANGE, whose recovery commits kafkajs' default offset (-2, "earliest") over
    # the group's offsets, racing the commits of the second round.
    for member in trio:
        event = member.commit(dict.fromkeys(member.assignment, 0))
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == dict.fromkeys(ALL, 0)

    # After one leaves, the survivors commit everything they own now, at generation N+1.
    leaver, rest = trio[2], trio[:2]
    assert leaver.leave() == 0
    wait_settled(server, group_id, rest)
    for member in rest:
        event = member.commit({p: 200 + p for p in member.assignment})
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == {p: 200 + p for p in ALL}
