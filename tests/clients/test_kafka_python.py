"""kafka-python consumers and admin client against a real minicoord process.

Each member is a stock `kafka.KafkaConsumer` driven by a thread of its own that polls it; every
other use of the consumer (commit, committed, close) is handed to that thread, since a
KafkaConsumer is not safe to share between threads. The member killed without a LeaveGroup
runs in a child process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from clientkit import (
    ALL,
    HEARTBEAT_MS,
    KILL_SESSION_MS,
    SESSION_MS,
    TOPIC,
    assert_exact_cover,
    generations,
    group_lines,
    is_exact_cover,
    stable_generations,
    stable_with,
    wait_log,
    wait_until,
)
from clientkit import KafkaPythonMember as Member
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.clients


class Members:
    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.all: list[Member] = []

    def add(self, **kwargs: Any) -> Member:
        member = Member(f"kp-{len(self.all)}", self.bootstrap, self.group, **kwargs)
        self.all.append(member)
        return member

    def add_many(self, n: int, **kwargs: Any) -> list[Member]:
        return [self.add(**kwargs) for _ in range(n)]

    def describe(self) -> str:
        return "; ".join(
            f"{m.name}{'(closed)' if m.closed else ''}={sorted(m.assignment)} "
            f"events={[(k, sorted(p)) for k, p in m.events[-4:]]} error={m.error!r}"
            for m in self.all
        )

    def check_threads(self) -> None:
        for m in self.all:
            assert m.error is None, f"{m.name} failed: {m.error!r}"

    def wait_cover(self, members: list[Member], timeout: float = 30) -> None:
        each = len(ALL) // len(members)

        def done() -> bool:
            self.check_threads()
            sets = [m.assignment for m in members]
            return is_exact_cover(sets) and all(len(s) == each for s in sets)

        wait_until(
            done, timeout, describe=self.describe, what=f"{len(members)} members to cover {TOPIC}"
        )

    def close_all(self) -> None:
        for member in self.all:
            try:
                member.close()
            except Exception:
                member._stop.set()


@pytest.fixture
def members(server: Any, group_id: str) -> Iterator[Members]:
    group = Members(server.bootstrap, group_id)
    yield group
    group.close_all()


@pytest.fixture
def admin(server: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="kp-admin")
    yield client
    client.close()


def owned(members: list[Member]) -> dict[str, frozenset[int]]:
    return {m.name: m.assignment for m in members}


def test_three_members_get_disjoint_complete_assignments(
    server: Any, members: Members, group_id: str
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    assert_exact_cover(owned(trio), each=2)
    # kafka-python prefers the range assignor: consecutive pairs of one 6-partition topic.
    assert sorted(sorted(m.assignment) for m in trio) == [[0, 1], [2, 3], [4, 5]]
    wait_until(lambda: all(m.member_id for m in trio), 10, what="member ids")
    assert len({m.member_id for m in trio}) == 3
    log = wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    assert generations(log, group_id)[-1][1] == 3
    assert stable_generations(log, group_id)[-1][0] == generations(log, group_id)[-1][0]
    assert "protocol range" in group_lines(log, group_id, "members, protocol")[-1]


def test_member_leaving_hands_its_partitions_to_the_others(
    server: Any, members: Members, group_id: str
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    leaver = trio[2]
    wait_until(lambda: leaver.member_id, 10, what="member id")
    leaver_id = leaver.member_id
    leaver.close()
    rest = trio[:2]
    members.wait_cover(rest, timeout=20)
    assert_exact_cover(owned(rest), each=3)
    log = wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    assert group_lines(log, group_id, f"member {leaver_id} left")
    assert not group_lines(log, group_id, "session timed out")
    assert generations(log, group_id)[-1][1] == 2


def test_killed_member_is_evicted_after_session_timeout(
    server: Any, members: Members, group_id: str, child_member: Callable[..., Any]
) -> None:
    pair = members.add_many(2)
    members.wait_cover(pair)
    before = {m.member_id for m in pair}
    child = child_member(
        "kafka-python",
        server.bootstrap,
        group_id,
        session_ms=KILL_SESSION_MS,
        heartbeat_ms=HEARTBEAT_MS,
    )

    def child_in() -> bool:
        members.check_threads()
        sets = [m.assignment for m in pair] + [child.assignment]
        return is_exact_cover(sets) and all(len(s) == 2 for s in sets)

    wait_until(
        child_in,
        30,
        describe=lambda: members.describe() + " | " + child.describe(),
        what="the child to join",
    )
    child_id = child.member_id
    assert child_id and child_id not in before
    child.kill()
    killed_at = time.monotonic()
    members.wait_cover(pair, timeout=KILL_SESSION_MS / 1000 + 20)
    elapsed = time.monotonic() - killed_at
    assert_exact_cover(owned(pair), each=3)
    log = wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    timed_out = group_lines(log, group_id, "session timed out after")
    assert len(timed_out) == 1, timed_out
    assert f"member {child_id} session timed out" in timed_out[0]
    assert not group_lines(log, group_id, " left")
    # Evicted only once its session lapsed (its last heartbeat came shortly before the kill;
    # the bound leaves room for a heartbeat delayed by a busy machine).
    assert elapsed >= KILL_SESSION_MS / 2000, elapsed
    assert generations(log, group_id)[-1][1] == 2


def test_commit_and_committed_round_trip(server: Any, members: Members, group_id: str) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    for member in trio:
        offsets = {
            TopicPartition(TOPIC, p): OffsetAndMetadata(100 + 7 * p, f"meta-{p}", -1)
            for p in sorted(member.assignment)
        }
        member.call(lambda c, o=offsets: c.commit(offsets=o, timeout_ms=10000))

    def committed_all(c: KafkaConsumer) -> list[Any]:
        return [
            c.committed(TopicPartition(TOPIC, p), metadata=True, timeout_ms=10000)
            for p in sorted(ALL)
        ]

    for member in trio:
        got = member.call(committed_all)
        assert [(o.offset, o.metadata) for o in got] == [
            (100 + 7 * p, f"meta-{p}") for p in sorted(ALL)
        ]
    # Another group has committed nothing.
    other = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=group_id + "-other",
        enable_auto_commit=False,
    )
    try:
        got = committed_all(other)
    finally:
        other.close(autocommit=False)
    assert got == [None] * len(ALL)


def test_static_member_restart_keeps_partitions_without_rebalance(
    server: Any, members: Members, group_id: str
) -> None:
    trio = [members.add(instance_id=f"static-{i}") for i in range(3)]
    members.wait_cover(trio)
    wait_until(lambda: all(m.member_id for m in trio), 10, what="member ids")
    time.sleep(0.5)
    log = wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    gens = generations(log, group_id)
    assert gens[-1][1] == 3
    leader_line = group_lines(log, group_id, f"generation {gens[-1][0]} with")[-1]
    # Restart the leader: the hardest case (it must not reassign a Stable group).
    restarted = next(m for m in trio if m.member_id in leader_line)
    others = [m for m in trio if m is not restarted]
    kept = restarted.assignment
    events_before = {m.name: list(m.events) for m in others}
    old_id = restarted.member_id
    restarted.close()  # static: no LeaveGroup
    replacement = members.add(instance_id=f"static-{trio.index(restarted)}")
    wait_until(
        lambda: replacement.assignment == kept and replacement.member_id,
        SESSION_MS / 1000 - 1,
        describe=members.describe,
        what="the restarted static member to get its partitions back",
    )
    assert replacement.member_id != old_id
    replaced = f"static member {replacement.member_id} replaced {old_id}"
    wait_log(server, lambda log: bool(group_lines(log, group_id, replaced)), what=replaced)
    time.sleep(2.0)  # several heartbeat intervals: a rebalance would show by now
    members.check_threads()
    log = server.log
    assert generations(log, group_id) == gens, "a new generation was handed out"
    assert not group_lines(log, group_id, f"member {old_id} left")
    for m in others:
        assert m.events == events_before[m.name], f"{m.name} saw a rebalance: {m.events}"
    assert_exact_cover(owned([*others, replacement]), each=2)
    # (kafka-python reports an empty revoke before its first join.)
    assert [e for e in replacement.events if e[1]] == [("assign", kept)]


def test_describe_groups(
    server: Any, members: Members, group_id: str, admin: KafkaAdminClient
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    wait_until(lambda: all(m.member_id for m in trio), 10, what="member ids")

    def describe() -> dict[str, Any]:
        return admin.describe_groups([group_id])[group_id]

    desc = wait_until(
        lambda: (d := describe())["group_state"] == "Stable" and d,
        15,
        interval=0.2,
        what="DescribeGroups to say Stable",
    )
    assert desc["error"] is None
    assert desc["protocol_type"] == "consumer"
    assert desc["protocol_data"] == "range"
    assert len(desc["members"]) == 3
    by_id = {m["member_id"]: m for m in desc["members"]}
    assert set(by_id) == {m.member_id for m in trio}
    for m in trio:
        described = by_id[m.member_id]
        assert described["client_id"] == m.name
        assert described["client_host"].lstrip("/") == "127.0.0.1"
        assert described["group_instance_id"] is None
        assignment = described["member_assignment"]
        parts = {
            (t["topic"], p) for t in assignment["assigned_partitions"] for p in t["partitions"]
        }
        assert parts == {(TOPIC, p) for p in m.assignment}
        assert described["member_metadata"]["topics"] == [TOPIC]
    missing = admin.describe_groups([group_id + "-missing"])[group_id + "-missing"]
    # DescribeGroups v6: an unknown group is GROUP_ID_NOT_FOUND (and described as Dead).
    assert missing["group_state"] == "Dead"
    assert missing["error"] is not None and "GroupIdNotFoundError" in missing["error"], missing
    assert missing["members"] == []


def test_list_groups(server: Any, members: Members, group_id: str, admin: KafkaAdminClient) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)

    def listed(**kwargs: Any) -> dict[str, dict[str, Any]]:
        return {g["group_id"]: g for g in admin.list_groups(**kwargs)}

    found = wait_until(
        lambda: (g := listed().get(group_id)) is not None and g["group_state"] == "Stable" and g,
        15,
        interval=0.2,
        what="ListGroups to show the group Stable",
    )
    assert found["protocol_type"] == "consumer"
    assert group_id in listed(states_filter=["Stable"])
    assert group_id not in listed(states_filter=["Empty"])
    members.close_all()
    wait_until(
        lambda: (g := listed().get(group_id)) is not None and g["group_state"] == "Empty",
        15,
        interval=0.2,
        what="the group to be listed Empty after everyone left",
    )
