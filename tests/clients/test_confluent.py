"""confluent-kafka (librdkafka) consumers and admin client against a real minicoord process.

Every member is a stock `confluent_kafka.Consumer`; they share this thread and are polled in
turn (librdkafka heartbeats and rebalances on its own threads, `poll` only serves callbacks).
The member killed without a LeaveGroup runs in a child process.
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
from clientkit import ConfluentMember as Member
from clientkit import ConfluentMembers as Members
from confluent_kafka import OFFSET_INVALID, Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.clients


@pytest.fixture
def members(server: Any, group_id: str) -> Iterator[Members]:
    group = Members(server.bootstrap, group_id)
    yield group
    group.close_all()


@pytest.fixture
def admin(server: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, "client.id": "ck-admin"})


def owned(members: list[Member]) -> dict[str, frozenset[int]]:
    return {m.name: m.assignment for m in members}


def test_three_members_get_disjoint_complete_assignments(
    server: Any, members: Members, group_id: str
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    assert_exact_cover(owned(trio), each=2)
    # Range over one 6-partition topic: consecutive pairs.
    assert sorted(sorted(m.assignment) for m in trio) == [[0, 1], [2, 3], [4, 5]]
    members.tick()
    assert len({m.member_id for m in trio}) == 3
    log = wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    assert generations(log, group_id)[-1][1] == 3
    assert stable_generations(log, group_id)[-1][0] == generations(log, group_id)[-1][0]


def test_member_leaving_hands_its_partitions_to_the_others(
    server: Any, members: Members, group_id: str
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    leaver = trio[2]
    leaver.close()
    assert leaver.member_id
    rest = trio[:2]
    members.wait_cover(rest, timeout=20)
    assert_exact_cover(owned(rest), each=3)
    log = wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    assert group_lines(log, group_id, f"member {leaver.member_id} left")
    assert not group_lines(log, group_id, "session timed out")
    assert generations(log, group_id)[-1][1] == 2


def test_killed_member_is_evicted_after_session_timeout(
    server: Any, members: Members, group_id: str, child_member: Callable[..., Any]
) -> None:
    pair = members.add_many(2)
    members.wait_cover(pair)
    child = child_member(
        "confluent",
        server.bootstrap,
        group_id,
        session_ms=KILL_SESSION_MS,
        heartbeat_ms=HEARTBEAT_MS,
    )

    def child_in() -> bool:
        sets = [m.assignment for m in pair] + [child.assignment]
        return is_exact_cover(sets) and all(len(s) == 2 for s in sets)

    wait_until(
        child_in,
        30,
        tick=members.tick,
        interval=0,
        describe=lambda: members.describe() + " | " + child.describe(),
        what="the child to join",
    )
    child_id = child.member_id
    assert child_id
    child.kill()
    killed_at = time.monotonic()
    members.wait_cover(pair, timeout=KILL_SESSION_MS / 1000 + 20)
    elapsed = time.monotonic() - killed_at
    assert_exact_cover(owned(pair), each=3)
    log = wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    assert group_lines(log, group_id, f"member {child_id} session timed out after")
    assert not group_lines(log, group_id, f"member {child_id} left")
    # Evicted only once its session lapsed (its last heartbeat came shortly before the kill;
    # the bound leaves room for a heartbeat delayed by a busy machine).
    assert elapsed >= KILL_SESSION_MS / 2000, elapsed
    assert generations(log, group_id)[-1][1] == 2


def test_commit_and_committed_round_trip(server: Any, members: Members, group_id: str) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    for member in trio:
        offsets = [
            TopicPartition(TOPIC, p, 100 + 7 * p, metadata=f"meta-{p}")
            for p in sorted(member.assignment)
        ]
        result = member.consumer.commit(offsets=offsets, asynchronous=False)
        assert result is not None
        assert all(tp.error is None for tp in result), result
    wanted = [TopicPartition(TOPIC, p) for p in sorted(ALL)]
    for member in trio:
        got = member.consumer.committed(wanted, timeout=10)
        assert [(tp.partition, tp.offset, tp.metadata, tp.error) for tp in got] == [
            (p, 100 + 7 * p, f"meta-{p}", None) for p in sorted(ALL)
        ]
    # Another group has no committed offsets for the topic.
    other = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id + "-other",
            "enable.auto.commit": False,
        }
    )
    try:
        got = other.committed(wanted, timeout=10)
    finally:
        other.close()
    assert [(tp.partition, tp.offset, tp.error) for tp in got] == [
        (p, OFFSET_INVALID, None) for p in sorted(ALL)
    ]


def test_cooperative_sticky_rebalances_incrementally(
    server: Any, members: Members, group_id: str
) -> None:
    joined: list[Member] = []
    for _ in range(3):
        joined.append(members.add(strategy="cooperative-sticky"))
        members.wait_cover(joined)
        # Let the follow-up rebalance (cooperative hands out revoked partitions in a second
        # round) finish before the next member arrives.
        members.settle(0.5)
        members.wait_cover(joined)
    a, b, c = joined
    assert_exact_cover(owned(joined), each=2)

    def kinds(m: Member) -> list[str]:
        return [k for k, _ in m.events]

    # Incremental: nobody lost everything; each revoke gave up only what moved.
    assert "lost" not in kinds(a) + kinds(b) + kinds(c)
    a_revoked = [p for k, p in a.events if k == "revoke"]
    b_revoked = [p for k, p in b.events if k == "revoke"]
    # b joining: a gave up 3 of its 6; c joining: a and b gave up one each.
    assert sorted(len(p) for p in a_revoked) == [1, 3], a.events
    assert [len(p) for p in b_revoked] == [1], b.events
    assert [k for k in kinds(c) if k == "revoke"] == []
    # The very first assign gave a all six; later assigns were increments.
    assert a.events[0] == ("assign", ALL)
    assigned_b = frozenset().union(*(p for k, p in b.events if k == "assign"))
    assert assigned_b == b.assignment | b_revoked[0]
    assert frozenset().union(*(p for k, p in c.events if k == "assign")) == c.assignment
    log = wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    assert all(
        "protocol cooperative-sticky" in line
        for line in group_lines(log, group_id, "members, protocol")
    )

    # c leaves: a and b each gain one of its partitions and revoke nothing.
    before = {m.name: len(m.events) for m in (a, b)}
    held = {m.name: m.assignment for m in (a, b)}
    c_parts = c.assignment
    c.close()
    members.wait_cover([a, b], timeout=20)
    assert_exact_cover(owned([a, b]), each=3)
    for m in (a, b):
        new_events = m.events[before[m.name] :]
        assert [k for k, _ in new_events if k != "assign"] == [], new_events
        assert held[m.name] <= m.assignment
        gained = m.assignment - held[m.name]
        assert gained <= c_parts and len(gained) == 1
        assert frozenset().union(*(p for _, p in new_events)) == gained


def test_static_member_restart_keeps_partitions_without_rebalance(
    server: Any, members: Members, group_id: str
) -> None:
    trio = [members.add(instance_id=f"static-{i}") for i in range(3)]
    members.wait_cover(trio)
    members.settle(0.5)
    log = wait_log(server, stable_with(group_id, 3), what="generation Stable with 3")
    gens = generations(log, group_id)
    assert gens[-1][1] == 3
    leader_line = group_lines(log, group_id, f"generation {gens[-1][0]} with")[-1]
    # Restart the leader: the hardest case (it must not reassign a Stable group).
    restarted = next(m for m in trio if m.member_id and m.member_id in leader_line)
    others = [m for m in trio if m is not restarted]
    kept = restarted.assignment
    events_before = {m.name: list(m.events) for m in others}
    old_id = restarted.member_id
    restarted.close()  # static: no LeaveGroup
    replacement = members.add(instance_id="static-" + str(trio.index(restarted)))

    wait_until(
        lambda: replacement.assignment == kept and bool(replacement.member_id),
        SESSION_MS / 1000 - 1,
        tick=members.tick,
        interval=0,
        describe=members.describe,
        what="the restarted static member to get its partitions back",
    )
    assert replacement.member_id != old_id
    replaced = f"static member {replacement.member_id} replaced {old_id}"
    wait_log(server, lambda log: bool(group_lines(log, group_id, replaced)), what=replaced)
    members.settle(2.0)  # several heartbeat intervals: a rebalance would show by now
    log = server.log
    assert generations(log, group_id) == gens, "a new generation was handed out"
    assert not group_lines(log, group_id, f"member {old_id} left")
    for m in others:
        assert m.events == events_before[m.name], f"{m.name} saw a rebalance: {m.events}"
    assert_exact_cover(owned([*others, replacement]), each=2)
    assert replacement.events == [("assign", kept)]


def test_describe_consumer_groups(
    server: Any, members: Members, group_id: str, admin: AdminClient
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)
    members.tick()

    def describe() -> Any:
        futures = admin.describe_consumer_groups([group_id], request_timeout=10)
        return futures[group_id].result(timeout=15)

    desc = wait_until(
        lambda: (d := describe()).state == ConsumerGroupState.STABLE and d,
        15,
        tick=members.tick,
        interval=0.2,
        describe=members.describe,
        what="DescribeGroups to say Stable",
    )
    assert desc.group_id == group_id
    assert desc.is_simple_consumer_group is False
    assert desc.partition_assignor == "range"
    assert desc.coordinator.port == server.port
    assert len(desc.members) == 3
    by_id = {m.member_id: m for m in desc.members}
    assert set(by_id) == {m.member_id for m in trio}
    for m in trio:
        described = by_id[m.member_id]
        assert described.client_id == m.name
        assert described.host.lstrip("/") == "127.0.0.1"
        parts = described.assignment.topic_partitions
        assert {tp.topic for tp in parts} == {TOPIC}
        assert frozenset(tp.partition for tp in parts) == m.assignment
    unknown = admin.describe_consumer_groups([group_id + "-missing"], request_timeout=10)
    gone = unknown[group_id + "-missing"]
    missing = gone.result(timeout=15)
    assert missing.state == ConsumerGroupState.DEAD
    assert missing.members == []


def test_list_consumer_groups(
    server: Any, members: Members, group_id: str, admin: AdminClient
) -> None:
    trio = members.add_many(3)
    members.wait_cover(trio)

    def listed(**kwargs: Any) -> dict[str, Any]:
        result = admin.list_consumer_groups(request_timeout=10, **kwargs).result(timeout=15)
        assert result.errors == []
        return {g.group_id: g for g in result.valid}

    wait_until(
        lambda: (g := listed().get(group_id)) is not None and g.state == ConsumerGroupState.STABLE,
        15,
        tick=members.tick,
        interval=0.2,
        what="ListGroups to show the group Stable",
    )
    found = listed()[group_id]
    assert found.is_simple_consumer_group is False
    assert group_id in listed(states={ConsumerGroupState.STABLE})
    assert group_id not in listed(states={ConsumerGroupState.EMPTY})
    members.close_all()
    wait_until(
        lambda: (
            listed().get(group_id) is not None
            and listed()[group_id].state == ConsumerGroupState.EMPTY
        ),
        15,
        interval=0.2,
        what="the group to be listed Empty after everyone left",
    )


def test_authorized_operations_without_acls_are_all_a_resource_supports(
    server: Any, members: Members, group_id: str, admin: AdminClient
) -> None:
    """Asked for with no authorizer, Kafka reports every operation the resource type
    supports (AuthHelper.authorizedOperations), not nothing."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as Op

    members.wait_cover(members.add_many(1))
    group = admin.describe_consumer_groups(
        [group_id], include_authorized_operations=True, request_timeout=10
    )[group_id].result(timeout=15)
    assert set(group.authorized_operations) == {
        Op.READ,
        Op.DESCRIBE,
        Op.DELETE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    }
    topic = admin.describe_topics(
        TopicCollection([TOPIC]), include_authorized_operations=True, request_timeout=10
    )[TOPIC].result(timeout=15)
    assert set(topic.authorized_operations) == {
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    }
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=10)
    assert set(cluster.result(timeout=15).authorized_operations) == {
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    }
    # Not asked for, none are reported.
    plain = admin.describe_topics(TopicCollection([TOPIC]), request_timeout=10)
    assert plain[TOPIC].result(timeout=15).authorized_operations is None


def test_topic_names_differing_only_by_dot_and_underscore_collide(
    server: Any, group_id: str, admin: AdminClient
) -> None:
    """As Kafka: a '.' and a '_' would give both topics one metric name, so the second is
    INVALID_TOPIC_EXCEPTION, whether created or auto-created by Metadata."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    stem = "".join(c if c.isalnum() else "-" for c in group_id)[-40:]
    dotted, underscored = f"c.{stem}", f"c_{stem}"
    admin.create_topics([NewTopic(dotted, 1)], request_timeout=10)[dotted].result(timeout=15)
    for validate_only in (True, False):
        future = admin.create_topics(
            [NewTopic(underscored, 1)], request_timeout=10, validate_only=validate_only
        )[underscored]
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=15)
        error = refused.value.args[0]
        assert error.code() == KafkaError.TOPIC_EXCEPTION
        assert error.str() == f"Topic '{underscored}' collides with existing topic: {dotted}"
    # The same name again is still TOPIC_ALREADY_EXISTS, not a collision with itself.
    again = admin.create_topics([NewTopic(dotted, 1)], request_timeout=10)[dotted]
    with pytest.raises(KafkaException) as exists:
        again.result(timeout=15)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    # Metadata naming it: unknown without auto-creation (as Kafka, which checks collisions
    # only when creating), refused with it.
    for auto_create, code in (
        (False, KafkaError.UNKNOWN_TOPIC_OR_PART),
        (True, KafkaError.TOPIC_EXCEPTION),
    ):
        consumer = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": group_id,
                "client.id": "ck-coll",
                "allow.auto.create.topics": auto_create,
            }
        )
        try:
            metadata = consumer.list_topics(underscored, timeout=10)
            assert metadata.topics[underscored].error.code() == code
        finally:
            consumer.close()
    listed = admin.list_topics(timeout=10).topics
    assert dotted in listed and underscored not in listed
