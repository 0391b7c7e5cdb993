"""One consumer group whose members are different stock clients sharing one assignor, "range".

The standard consumer protocol lets any member be the leader that computes the assignment, so
the members must agree on the protocol name (the coordinator picks one that every member
offered) and on the encodings of subscriptions and assignments. kafkajs and
@platformatic/kafka do not ship a "range" assignor, so node/member.mjs gives them Kafka's
RangeAssignor under that name; librdkafka (confluent-kafka, kcat) and kafka-python are told to
offer only "range". Since every RangeAssignor sorts the members by id, the expected assignment
follows from the member ids alone, whoever leads. Each test starts one Node member first, so
that it leads (the coordinator keeps the leader through rebalances) and its "range" computes
the assignment of every client; then that leader leaves, and a member of another client leads
the next generation.
"""

from __future__ import annotations

from typing import Any

import pytest
from matrixkit import (
    ALL,
    assert_exact_cover,
    committed_offsets,
    generations,
    last_generation,
    owned,
    range_assignment,
    wait_settled,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("node_clients", "kcat")]


def leader_of(server: Any, group: str) -> str:
    return generations(server.log, group)[-1][3]


def check_range(server: Any, group: str, members: list[Any]) -> None:
    view = wait_settled(server, group, members)
    assert view.protocol == "range"
    assert_exact_cover(owned(members))
    assert owned(members) == range_assignment(m.member_id for m in members)
    last_generation(server, group, len(members), "range")
    # The coordinator's DescribeGroups names each member's own client.
    assert {view.client_ids[m.member_id] for m in members} == {m.name for m in members}


def test_kafkajs_confluent_and_kafka_python_share_one_group(
    server: Any, spawn: Any, group_id: str
) -> None:
    first = spawn.node("kafkajs", group_id, client_id="mixed-kafkajs", assignor="range")
    wait_settled(server, group_id, [first])
    members = [
        first,
        spawn.py("confluent", group_id, client_id="mixed-confluent", assignor="range"),
        spawn.py("kafka-python", group_id, client_id="mixed-kafka-python", assignor="range"),
    ]
    check_range(server, group_id, members)
    assert leader_of(server, group_id) == first.member_id
    assert all(len(m.assignment) == 2 for m in members)

    # Every client commits its own partitions in the shared generation.
    for member in members:
        event = member.commit({p: 10 * (p + 1) for p in member.assignment})
        assert event["ok"], member.describe()
    assert committed_offsets(server.bootstrap, group_id) == {p: 10 * (p + 1) for p in ALL}

    # The leader leaves; the other two (two different clients) rebalance, one of them leading.
    leader, rest = first, members[1:]
    before = last_generation(server, group_id, 3, "range")[0]
    assert leader.leave() == 0
    check_range(server, group_id, rest)
    assert all(len(m.assignment) == 3 for m in rest)
    generation, _, _, new_leader = last_generation(server, group_id, 2, "range")
    assert generation > before and new_leader in {m.member_id for m in rest}
    wait_until(
        lambda: f"member {leader.member_id} left" in server.log,
        10,
        what="the coordinator's log of the leave",
    )
    assert not any(m.errors() for m in members), [m.describe() for m in members]


def test_five_clients_share_one_group_through_a_leave_and_a_crash(
    server: Any, spawn: Any, group_id: str
) -> None:
    first = spawn.node("platformatic", group_id, client_id="mixed-platformatic", assignor="range")
    wait_settled(server, group_id, [first])
    kcat = spawn.kcat(group_id, client_id="mixed-kcat", assignor="range", session_ms=3000)
    members = [
        first,
        spawn.node("kafkajs", group_id, client_id="mixed-kafkajs", assignor="range"),
        spawn.py("confluent", group_id, client_id="mixed-confluent", assignor="range"),
        spawn.py("kafka-python", group_id, client_id="mixed-kafka-python", assignor="range"),
        kcat,
    ]
    check_range(server, group_id, members)
    assert leader_of(server, group_id) == first.member_id
    assert sorted(len(m.assignment) for m in members) == [1, 1, 1, 1, 2]

    # kcat dies without a LeaveGroup: the coordinator drops it when its 3 s session expires.
    kcat.kill()
    survivors = [m for m in members if m is not kcat]
    check_range(server, group_id, survivors)
    assert sorted(len(m.assignment) for m in survivors) == [1, 1, 2, 2]
    assert f"member {kcat.member_id} session timed out" in server.log, server.log
    assert leader_of(server, group_id) == first.member_id

    # The leader leaves cleanly; the remaining three rebalance under another client's leader.
    leader, rest = first, survivors[1:]
    assert leader.leave() == 0
    check_range(server, group_id, rest)
    assert all(len(m.assignment) == 2 for m in rest)
    assert leader_of(server, group_id) in {m.member_id for m in rest}
    assert not any(m.errors() for m in survivors), [m.describe() for m in survivors]
