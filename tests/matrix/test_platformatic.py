"""@platformatic/kafka (1.x, npm; the line that runs on Node 20) consumers against a real
minicoord process.

Each member is a stock `Consumer` in its own Node process (node/member.mjs) consuming through
`consume()` with the library's default group protocol, "roundrobin": its leader deals the
partitions round-robin over the members in the order the JoinGroup response lists them (it
does not sort them), so with n members the assignments are exactly the residue classes of the
partitions mod n, whoever gets which. The assignments are checked three ways: what each member
says it got, what the coordinator holds (DescribeGroups), and that shape.
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
    wait_settled,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("node_clients")]

CLIENT = "platformatic"
PROTOCOL = "roundrobin"


def start_members(spawn: Any, group: str, n: int) -> list[Any]:
    return [spawn.node(CLIENT, group, client_id=f"platformatic-{i}") for i in range(n)]


def residue_classes(n: int) -> list[list[int]]:
    return sorted(sorted(p for p in ALL if p % n == r) for r in range(n))


def test_three_members_split_the_topic_and_rebalance_when_one_leaves(
    server: Any, spawn: Any, group_id: str
) -> None:
    trio = start_members(spawn, group_id, 3)
    view = wait_settled(server, group_id, trio)
    assert view.protocol == PROTOCOL
    assert_exact_cover(owned(trio))
    assert sorted(sorted(s) for s in owned(trio).values()) == residue_classes(3)
    before = last_generation(server, group_id, 3, PROTOCOL)[0]

    leaver, rest = trio[1], [trio[0], trio[2]]
    assert leaver.leave() == 0
    assert leaver.snapshot()[-1]["event"] == "closed", leaver.describe()

    wait_settled(server, group_id, rest)
    assert_exact_cover(owned(rest))
    assert sorted(sorted(s) for s in owned(rest).values()) == residue_classes(2)
    wait_until(
        lambda: f"member {leaver.member_id} left" in server.log,
        10,
        what="the coordinator's log of the leave",
    )
    generation = last_generation(server, group_id, 2, PROTOCOL)[0]
    assert generation > before
    # The survivors were told of the rebalance, and each member's last assignment carries the
    # generation the coordinator formed last.
    for member in rest:
        kinds = [e["event"] for e in member.snapshot()]
        assert "revoked" in kinds and kinds[-1] == "assigned", member.describe()
        assert member.snapshot()[-1]["generation"] == generation
    assert not any(m.errors() for m in trio), [m.describe() for m in trio]


def test_members_commit_offsets_before_and_after_a_rebalance(
    server: Any, spawn: Any, group_id: str
) -> None:
    trio = start_members(spawn, group_id, 3)
    wait_settled(server, group_id, trio)
    assert committed_offsets(server.bootstrap, group_id) == dict.fromkeys(ALL)

    # consumer.commit() of each member's own partitions, at generation N.
    for member in trio:
        event = member.commit({p: 100 + p for p in member.assignment})
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == {p: 100 + p for p in ALL}

    # After one leaves, the survivors commit everything they own now, at generation N+1.
    leaver, rest = trio[0], trio[1:]
    assert leaver.leave() == 0
    wait_settled(server, group_id, rest)
    for member in rest:
        event = member.commit({p: 200 + p for p in member.assignment})
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == {p: 200 + p for p in ALL}
    assert not any(m.errors() for m in trio), [m.describe() for m in trio]
