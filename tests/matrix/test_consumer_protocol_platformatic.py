"""@platformatic/kafka (1.x) with KIP-848's consumer group protocol (`groupProtocol:
'consumer'`: ConsumerGroupHeartbeat, at v1 with a member id it makes up, a UUID) against a
real minicoord process: alone, and in one group with confluent-kafka's consumer protocol and
a classic kafkajs member.

The coordinator computes every assignment (its assignors "uniform", the default, and
"range", which a member asks for with `groupRemoteAssignor` / `group.remote.assignor`).
@platformatic/kafka sends a full heartbeat every time (subscription, rebalance timeout and
owned partitions) and exposes its assignment as `consumer.assignments`, which
node/member.mjs reports after each change as the member's whole assignment. kafkajs has no
ConsumerGroupHeartbeat: it joins the consumer group with JoinGroup/SyncGroup as a classic
member (protocol type "consumer"), and the coordinator assigns its partitions too.
"""

from __future__ import annotations

from typing import Any

import pytest
from groupkit import rebalances, settled_with
from matrixkit import (
    ALL,
    assert_exact_cover,
    committed_offsets,
    owned,
    range_assignment,
    wait_settled,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("node_clients")]


def platformatic(spawn: Any, group: str, name: str, **options: Any) -> Any:
    return spawn.node("platformatic", group, client_id=name, group_protocol="consumer", **options)


def wait_settled_log(server: Any, group: str, members: int) -> None:
    """The coordinator's log line of a rebalance that ended Stable with `members` (the log is
    read by a thread: it may arrive just after the clients saw the effect)."""
    wait_until(
        lambda: settled_with(group, members)(server.log),
        10,
        describe=lambda: "\n".join(server.log.splitlines()[-15:]),
        what=f"a Stable rebalance of {group} with {members} members",
    )


def test_platformatic_members_split_the_topic_and_a_leaver_costs_the_others_nothing(
    server: Any, spawn: Any, group_id: str
) -> None:
    trio = [platformatic(spawn, group_id, f"cgp-platformatic-{i}") for i in range(3)]
    view = wait_settled(server, group_id, trio)
    assert (view.group_type, view.protocol) == ("CONSUMER", "uniform")
    assert_exact_cover(owned(trio))
    assert all(len(m.assignment) == 2 for m in trio)
    assert {view.client_ids[m.member_id] for m in trio} == {m.name for m in trio}
    wait_settled_log(server, group_id, 3)

    # consumer.commit() sends the member's epoch with its offsets (OffsetCommit v9+).
    for member in trio:
        event = member.commit({p: 300 + p for p in member.assignment})
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == {p: 300 + p for p in ALL}

    leaver, rest = trio[0], trio[1:]
    held = {m.name: m.assignment for m in rest}
    seen = {m.name: len(m.snapshot()) for m in rest}
    assert leaver.leave() == 0  # consumer.close(): a heartbeat at epoch -1
    assert leaver.snapshot()[-1]["event"] == "closed", leaver.describe()
    wait_settled(server, group_id, rest)
    assert_exact_cover(owned(rest))
    for m in rest:
        assert len(m.assignment) == 3
        # Incremental: every assignment it reported since kept what it held before.
        later = [e for e in m.snapshot()[seen[m.name] :] if e["event"] == "assigned"]
        assert later and all(held[m.name] <= set(e["partitions"]) for e in later), m.describe()
    wait_settled_log(server, group_id, 2)
    log = server.log
    assert f"member {leaver.member_id} left" in log
    assert "session timed out" not in log
    assert {r.protocol for r in rebalances(log, group_id)} == {"consumer"}
    assert not any(m.errors() for m in trio), [m.describe() for m in trio]


def test_platformatic_confluent_and_kafkajs_share_a_range_assigned_consumer_group(
    server: Any, spawn: Any, group_id: str
) -> None:
    first = platformatic(spawn, group_id, "cgp-platformatic", remote_assignor="range")
    wait_settled(server, group_id, [first])  # the group is a consumer group from the start
    members = [
        first,
        spawn.py(
            "confluent",
            group_id,
            client_id="cgp-confluent",
            group_protocol="consumer",
            remote_assignor="range",
        ),
        spawn.node("kafkajs", group_id, client_id="cgp-kafkajs"),  # classic
    ]
    kafkajs = members[2]
    view = wait_settled(server, group_id, members)
    # The consumer-protocol members chose "range"; the classic member's own assigner plays no
    # part (it is a follower), and the range covers every member, sorted by member id.
    assert (view.group_type, view.protocol) == ("CONSUMER", "range")
    assert owned(members) == range_assignment(m.member_id for m in members)
    assert all(len(m.assignment) == 2 for m in members)
    wait_settled_log(server, group_id, 3)

    # Each client commits its own partitions: the consumer-protocol members with their member
    # epoch, kafkajs with its generation (its member epoch as the coordinator told it).
    for member in members:
        event = member.commit({p: 40 + p for p in member.assignment})
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == {p: 40 + p for p in ALL}

    # The classic member leaves (LeaveGroup); the range is recomputed over the other two.
    assert kafkajs.leave() == 0
    rest = members[:2]
    view = wait_settled(server, group_id, rest)
    assert owned(rest) == range_assignment(m.member_id for m in rest)
    wait_settled_log(server, group_id, 2)
    assert f"members {kafkajs.member_id} left" in server.log
    assert {r.protocol for r in rebalances(server.log, group_id)} == {"consumer"}
    assert not any(m.errors() for m in members), [m.describe() for m in members]
