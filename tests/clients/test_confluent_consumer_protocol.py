"""confluent-kafka (librdkafka) consumers speaking KIP-848's consumer group protocol
(`group.protocol=consumer`: ConsumerGroupHeartbeat and ConsumerGroupDescribe) against a real
minicoord process, checked against what Kafka 4.x does.

The coordinator computes every assignment (its assignors "uniform", the default, and "range",
chosen with `group.remote.assignor`) and members reconcile incrementally: a member keeps what
stays its own and gives up only what moves, so a member leaving costs the others nothing they
held. Members share this thread and are polled in turn, as in test_confluent.py; the member
killed without leaving runs in a child process. The session timeout and heartbeat interval
are the server's (`group.consumer.*`), which librdkafka does not let a client set.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from clientkit import (
    ALL,
    PARTITIONS,
    RDKAFKA_LOG,
    TOPIC,
    ConfluentMember,
    ConfluentMembers,
    assert_exact_cover,
    group_lines,
    is_exact_cover,
    wait_log,
    wait_until,
)
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from deliverykit import Consumed, check_delivery, keyed_messages
from groupkit import (
    describe_consumer_group,
    epoch_bumps,
    member_epochs,
    range_assignment,
    rebalances,
    settled_with,
)
from kafka import KafkaAdminClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.process import ServerProcess, start_server_process

pytestmark = pytest.mark.clients

OTHER = "other3"  # a second topic, for the assignors' multi-topic rules
OTHER_PARTITIONS = 3
# The kill test's server: a member that stops heartbeating is fenced 2 s after its last one.
KILL_SESSION_MS = 2000
SHORT_SESSION = {
    "group.consumer.session.timeout.ms": KILL_SESSION_MS,
    "group.consumer.heartbeat.interval.ms": 200,
}
CALL_TIMEOUT_S = 15
_BAD_LINE = re.compile(r" (WARNING|ERROR|CRITICAL) |Traceback")


@pytest.fixture
def kafka_server(request: pytest.FixtureRequest, server_factory: Any) -> ServerProcess:
    """The server of tests/clients (conftest's `server` checks its log) with a second topic;
    a test parametrizes it indirectly to change server configs."""
    configs: dict[str, object] = getattr(request, "param", {})
    return server_factory(configs, topics=[(TOPIC, PARTITIONS), (OTHER, OTHER_PARTITIONS)])


@pytest.fixture
def members(server: ServerProcess, group_id: str) -> Iterator[ConfluentMembers]:
    group = ConfluentMembers(server.bootstrap, group_id, prefix="cgp")
    yield group
    group.close_all()


@pytest.fixture
def admin(server: ServerProcess) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": server.bootstrap, "client.id": "cgp-admin", "logger": RDKAFKA_LOG}
    )


def owned(members: list[ConfluentMember]) -> dict[str, frozenset[int]]:
    return {m.name: m.assignment for m in members}


def consumer_members(members: ConfluentMembers, n: int, **kwargs: Any) -> list[ConfluentMember]:
    return members.add_many(n, protocol="consumer", **kwargs)


def describe(admin: AdminClient, group: str) -> Any:
    """DescribeConsumerGroups as librdkafka does it: ConsumerGroupDescribe first, the classic
    DescribeGroups for a group the coordinator says is not a consumer group."""
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)


def listed(admin: AdminClient, **filters: Any) -> dict[str, Any]:
    result = admin.list_consumer_groups(request_timeout=10, **filters).result(timeout=15)
    assert result.errors == []
    return {g.group_id: g for g in result.valid}


def test_three_members_split_the_topic_and_a_leaver_costs_the_others_nothing(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    trio = consumer_members(members, 3)
    members.wait_cover(trio)
    assert_exact_cover(owned(trio), each=2)
    members.tick()
    # librdkafka makes up its member ids (ConsumerGroupHeartbeat v1, KIP-1082).
    assert len({m.member_id for m in trio}) == 3 and all(m.member_id for m in trio)
    log = wait_log(server, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
    assert "classic" not in {r.protocol for r in rebalances(log, group_id)}
    described = describe_consumer_group(server.bootstrap, group_id)
    assert described.error_code == 0
    assert (described.group_state, described.assignor_name) == ("Stable", "uniform")
    assert described.assignment_epoch == described.group_epoch
    assert set(member_epochs(described).values()) == {described.group_epoch}
    assert {m.member_id for m in described.members} == {m.member_id for m in trio}

    leaver, rest = trio[2], trio[:2]
    held = {m.name: m.assignment for m in rest}
    seen = {m.name: len(m.events) for m in rest}
    leaver.close()
    members.wait_cover(rest, timeout=20)
    assert_exact_cover(owned(rest), each=3)
    for m in rest:
        # Incremental: each survivor kept what it had and was only given more.
        assert held[m.name] < m.assignment, (m.name, held[m.name], m.assignment)
        new = [(kind, parts) for kind, parts in m.events[seen[m.name] :] if parts]
        assert [kind for kind, _ in new] == ["assign"], new
        assert new[0][1] == m.assignment - held[m.name]
    log = wait_log(server, settled_with(group_id, 2), what="a Stable rebalance with 2 members")
    assert group_lines(log, group_id, f"member {leaver.member_id} left")
    assert epoch_bumps(log, group_id)[-1][1] == f"member {leaver.member_id} left"
    assert not group_lines(log, group_id, "session timed out")


def test_commit_and_committed_round_trip(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    trio = consumer_members(members, 3)
    members.wait_cover(trio)
    for member in trio:
        offsets = [
            TopicPartition(TOPIC, p, 100 + 7 * p, metadata=f"meta-{p}")
            for p in sorted(member.assignment)
        ]
        # OffsetCommit v9+ carries the member id and epoch, which the coordinator checks.
        result = member.consumer.commit(offsets=offsets, asynchronous=False)
        assert result is not None
        assert all(tp.error is None for tp in result), result
    wanted = [TopicPartition(TOPIC, p) for p in sorted(ALL)]
    for member in trio:
        got = member.consumer.committed(wanted, timeout=CALL_TIMEOUT_S)
        assert [(tp.partition, tp.offset, tp.metadata, tp.error) for tp in got] == [
            (p, 100 + 7 * p, f"meta-{p}", None) for p in sorted(ALL)
        ]

    outsider = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id,
            "client.id": "cgp-outsider",
            "enable.auto.commit": False,
            "logger": RDKAFKA_LOG,
        }
    )
    other_group = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id + "-other",
            "enable.auto.commit": False,
            "logger": RDKAFKA_LOG,
        }
    )
    try:
        # A non-member reads the group's offsets (OffsetFetch without a member id is allowed)...
        got = outsider.committed(wanted, timeout=CALL_TIMEOUT_S)
        assert [(tp.partition, tp.offset) for tp in got] == [(p, 100 + 7 * p) for p in ALL]
        # ...but may not commit while the group has members: Kafka answers UNKNOWN_MEMBER_ID
        # to generation -1 and no member id for a consumer group that is not empty.
        with pytest.raises(KafkaException) as refused:
            outsider.commit(offsets=[TopicPartition(TOPIC, 0, 999)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID, refused.value
        # Another group has no committed offsets for the topic.
        got = other_group.committed(wanted, timeout=CALL_TIMEOUT_S)
        assert [(tp.partition, tp.offset, tp.error) for tp in got] == [
            (p, OFFSET_INVALID, None) for p in sorted(ALL)
        ]
    finally:
        outsider.close()
        other_group.close()
    assert trio[0].consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 100


def test_group_reads_exactly_what_was_produced(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    trio = consumer_members(members, 3)
    # Nothing is in the topic until the group is settled: members' polls while it forms would
    # read (and drop) records, and a partition moving on would be read twice.
    members.wait_cover(trio)
    wait_log(server, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
    produced = keyed_messages(900, tag="cgp")
    reports: dict[int, tuple[int, int]] = {}
    failures: list[str] = []

    def delivered(index: int) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failures.append(f"message {index}: {err}")
            else:
                reports[index] = (msg.partition(), msg.offset())

        return report

    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "client.id": "cgp-producer",
            "enable.idempotence": True,
            "linger.ms": 5,
            "logger": RDKAFKA_LOG,
        }
    )
    for i, message in enumerate(produced):
        producer.produce(
            TOPIC,
            key=message.key,
            value=message.value,
            headers=list(message.headers),
            on_delivery=delivered(i),
        )
        producer.poll(0)
    assert producer.flush(CALL_TIMEOUT_S) == 0
    assert not failures and len(reports) == len(produced), failures[:5]

    consumed: dict[str, list[Consumed]] = {m.name: [] for m in trio}
    errors: list[str] = []

    def take() -> None:
        for m in trio:
            for msg in m.consumer.consume(num_messages=500, timeout=0.02):
                if msg.error() is not None:
                    errors.append(f"{m.name}: {msg.error()}")
                    continue
                consumed[m.name].append(
                    Consumed(
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        tuple(msg.headers() or ()),
                    )
                )

    wait_until(
        lambda: sum(len(c) for c in consumed.values()) >= len(produced),
        30,
        tick=take,
        interval=0,
        describe=lambda: f"read {[len(c) for c in consumed.values()]} errors {errors[:3]}",
        what="the group to read everything",
    )
    assert not errors, errors[:5]
    for m in trio:
        # Each member read only its own partitions.
        assert {r.partition for r in consumed[m.name]} <= m.assignment, m.name
    records = [r for m in trio for r in consumed[m.name]]
    ends = check_delivery(produced, records, PARTITIONS, [reports[i] for i in range(len(produced))])

    for m in trio:
        # Each member commits where it stands: one past the last record it read.
        positions = m.consumer.position([TopicPartition(TOPIC, p) for p in sorted(m.assignment)])
        result = m.consumer.commit(offsets=positions, asynchronous=False) or []
        assert all(tp.error is None for tp in result), result
    got = trio[0].consumer.committed(
        [TopicPartition(TOPIC, p) for p in sorted(ALL)], timeout=CALL_TIMEOUT_S
    )
    assert {tp.partition: tp.offset for tp in got} == ends


@pytest.mark.parametrize("kafka_server", [SHORT_SESSION], indirect=True, ids=["session-2s"])
def test_killed_member_is_fenced_after_the_session_timeout(
    server: ServerProcess,
    members: ConfluentMembers,
    group_id: str,
    child_member: Callable[..., Any],
) -> None:
    pair = consumer_members(members, 2)
    members.wait_cover(pair)
    child = child_member("confluent", server.bootstrap, group_id, group_protocol="consumer")

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
    wait_log(server, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
    held = {m.name: m.assignment for m in pair}
    seen = {m.name: len(m.events) for m in pair}

    child.kill()  # SIGKILL: no leaving heartbeat (epoch -1) is ever sent
    killed_at = time.monotonic()
    members.wait_cover(pair, timeout=KILL_SESSION_MS / 1000 + 15)
    elapsed = time.monotonic() - killed_at
    assert_exact_cover(owned(pair), each=3)
    for m in pair:
        assert held[m.name] < m.assignment
        assert [k for k, p in m.events[seen[m.name] :] if p] == ["assign"], m.events
    log = wait_log(server, settled_with(group_id, 2), what="a Stable rebalance with 2 members")
    fenced = f"member {child_id} session timed out after {KILL_SESSION_MS} ms; fencing it"
    assert group_lines(log, group_id, fenced), log
    assert not group_lines(log, group_id, f"member {child_id} left")
    assert epoch_bumps(log, group_id)[-1][1] == f"member {child_id} session timed out"
    # Fenced only once its session lapsed: its last heartbeat came at most one interval (200
    # ms) before the kill; the bound leaves room for a heartbeat delayed by a busy machine.
    assert KILL_SESSION_MS / 1000 - 0.5 <= elapsed <= KILL_SESSION_MS / 1000 + 5, elapsed


def test_static_member_restart_gets_its_partitions_back_and_nobody_else_moves(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    trio = [members.add(protocol="consumer", instance_id=f"static-{i}") for i in range(3)]
    members.wait_cover(trio)
    wait_log(server, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
    before = describe_consumer_group(server.bootstrap, group_id)
    bumps = epoch_bumps(server.log, group_id)
    restarted, others = trio[1], [trio[0], trio[2]]
    kept = restarted.assignment
    events_before = {m.name: list(m.events) for m in others}
    old_id = restarted.member_id

    restarted.close()  # a static member leaves "for now": epoch -2, its partitions wait
    away = f"static member {old_id} (static-1) left for now"
    wait_log(server, lambda log: bool(group_lines(log, group_id, away)), what=away)
    replacement = members.add(protocol="consumer", instance_id="static-1")
    wait_until(
        lambda: replacement.assignment == kept and bool(replacement.member_id),
        8,  # well inside the server's 10 s session timeout
        tick=members.tick,
        interval=0,
        describe=members.describe,
        what="the restarted static member to get its partitions back",
    )
    assert replacement.member_id != old_id
    replaced = f"static member {replacement.member_id} replaced {old_id} as static-1"
    wait_log(server, lambda log: bool(group_lines(log, group_id, replaced)), what=replaced)
    members.settle(1.5)  # several heartbeat intervals: a rebalance would show by now

    after = describe_consumer_group(server.bootstrap, group_id)
    assert epoch_bumps(server.log, group_id) == bumps, "the group epoch was bumped"
    assert (after.group_epoch, after.assignment_epoch) == (
        before.group_epoch,
        before.assignment_epoch,
    )
    epochs = member_epochs(after)
    assert set(epochs) == {m.member_id for m in [*others, replacement]}
    for m in others:
        assert m.events == events_before[m.name], f"{m.name} saw a rebalance: {m.events}"
        assert epochs[m.member_id] == member_epochs(before)[m.member_id]
    # The replacement took over the old member's target and reconciled to the same epoch.
    assert epochs[replacement.member_id] == before.assignment_epoch
    assert replacement.changes() == [("assign", kept)]
    by_instance = {m.instance_id: m for m in after.members}
    assert by_instance["static-1"].member_id == replacement.member_id
    assert_exact_cover(owned([*others, replacement]), each=2)


def test_a_second_consumer_with_a_live_instance_id_is_refused(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    (holder,) = [members.add(protocol="consumer", instance_id="taken")]
    members.wait_cover([holder])
    intruder = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id,
            "client.id": "cgp-intruder",
            "group.protocol": "consumer",
            "group.instance.id": "taken",
            "logger": RDKAFKA_LOG,
        }
    )
    errors: list[KafkaError] = []
    try:
        intruder.subscribe([TOPIC])

        def poll() -> bool:
            members.tick()
            msg = intruder.poll(0.02)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
            return bool(errors)

        wait_until(poll, 15, interval=0, what="the intruder to be refused")
        # Kafka: UNRELEASED_INSTANCE_ID while the instance id's holder has not left (epoch
        # -2); librdkafka makes it fatal.
        (error,) = errors
        assert error.code() == KafkaError._FATAL, error
        assert KafkaError(KafkaError.UNRELEASED_INSTANCE_ID).str() in error.str(), error
        assert intruder.assignment() == []
    finally:
        intruder.close()
    members.settle(0.5)
    assert holder.assignment == ALL and holder.changes() == [("assign", ALL)]
    assert [m.member_id for m in describe_consumer_group(server.bootstrap, group_id).members] == [
        holder.member_id
    ]


def test_classic_describe_of_a_consumer_group_says_it_is_not_classic(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    """kafka-python's admin client asks DescribeGroups (the classic API, v6 here), which in
    Kafka 4.x answers a consumer group with GROUP_ID_NOT_FOUND and the message "Group X is
    not a classic group." (GroupMetadataManager#classicGroup), and a group that does not exist
    with "Group X not found."; kafka-python shows that message to its user."""
    trio = consumer_members(members, 3)
    members.wait_cover(trio)
    missing = group_id + "-missing"
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="cgp-kp-admin")
    try:
        described = admin.describe_groups([group_id, missing])
    finally:
        admin.close()
    assert described[group_id]["group_state"] == "Dead"
    assert described[group_id]["members"] == []
    assert described[group_id]["error"] == (
        f"[Error 69] GroupIdNotFoundError: Group {group_id} is not a classic group."
    )
    assert described[missing]["error"] == (
        f"[Error 69] GroupIdNotFoundError: Group {missing} not found."
    )


@pytest.mark.parametrize("kafka_server", [SHORT_SESSION], indirect=True, ids=["session-2s"])
def test_static_member_that_does_not_return_is_fenced_after_the_session_timeout(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    trio = [members.add(protocol="consumer", instance_id=f"static-{i}") for i in range(3)]
    members.wait_cover(trio)
    gone, rest = trio[0], trio[1:]
    gone_id = gone.member_id
    held = {m.name: m.assignment for m in rest}
    gone.close()  # epoch -2: its partitions wait for it, for one session timeout
    left_at = time.monotonic()
    away = f"static member {gone_id} (static-0) left for now"
    wait_log(server, lambda log: bool(group_lines(log, group_id, away)), what=away)
    # Meanwhile nobody takes its partitions.
    members.settle(KILL_SESSION_MS / 1000 / 2)
    assert owned(rest) == held
    members.wait_cover(rest, timeout=KILL_SESSION_MS / 1000 + 15)
    elapsed = time.monotonic() - left_at
    assert_exact_cover(owned(rest), each=3)
    assert all(held[m.name] < m.assignment for m in rest)
    log = wait_log(server, settled_with(group_id, 2), what="a Stable rebalance with 2 members")
    fenced = f"member {gone_id} session timed out after {KILL_SESSION_MS} ms; fencing it"
    assert group_lines(log, group_id, fenced), log
    assert elapsed >= KILL_SESSION_MS / 1000 - 0.5, elapsed
    assert "static-0" not in {
        m.instance_id for m in describe_consumer_group(server.bootstrap, group_id).members
    }


def test_range_assignor_follows_kafkas_range_rules_over_two_topics(
    server: ServerProcess, members: ConfluentMembers, group_id: str, admin: AdminClient
) -> None:
    topics = {TOPIC: PARTITIONS, OTHER: OTHER_PARTITIONS}
    trio = consumer_members(members, 3, remote_assignor="range", topics=tuple(topics))
    members.tick()
    assert all(m.member_id for m in trio)

    def matches(group: list[ConfluentMember]) -> bool:
        expected = range_assignment([m.member_id or "" for m in group], topics)
        return {m.member_id: m.assigned_tps for m in group} == expected

    def state() -> str:
        return "; ".join(f"{m.member_id}={sorted(m.assigned_tps)}" for m in trio)

    wait_until(
        lambda: matches(trio), 20, tick=members.tick, interval=0, describe=state,
        what="the range assignment",
    )  # fmt: skip
    # Per topic, consecutive runs in member-id order: 2+2+2 of topic6 and 1+1+1 of other3.
    ordered = sorted(trio, key=lambda m: m.member_id or "")
    for i, m in enumerate(ordered):
        assert m.assigned_tps == {(TOPIC, 2 * i), (TOPIC, 2 * i + 1), (OTHER, i)}
    desc = wait_until(
        lambda: (d := describe(admin, group_id)).state == ConsumerGroupState.STABLE and d,
        15,
        tick=members.tick,
        interval=0.2,
        what="the group to be described Stable",
    )
    assert desc.partition_assignor == "range"
    # ConsumerGroupDescribe, asked for them with no authorizer: every group operation.
    ops = admin.describe_consumer_groups(
        [group_id], include_authorized_operations=True, request_timeout=10
    )[group_id].result(15)
    assert {op.name for op in ops.authorized_operations} == {
        "READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"
    }  # fmt: skip

    # Range is not sticky: with one member gone the rest get the ranges of two members.
    ordered[0].close()
    rest = ordered[1:]
    wait_until(
        lambda: matches(rest), 20, tick=members.tick, interval=0, describe=state,
        what="the range assignment of the two left",
    )  # fmt: skip
    assert rest[0].assigned_tps == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2), (OTHER, 0), (OTHER, 1)}
    assert rest[1].assigned_tps == {(TOPIC, 3), (TOPIC, 4), (TOPIC, 5), (OTHER, 2)}


def test_uniform_assignor_balances_partitions_over_two_topics(
    server: ServerProcess, members: ConfluentMembers, group_id: str, admin: AdminClient
) -> None:
    topics = (TOPIC, OTHER)
    trio = consumer_members(members, 3, remote_assignor="uniform", topics=topics)
    every = {(t, p) for t, n in ((TOPIC, PARTITIONS), (OTHER, OTHER_PARTITIONS)) for p in range(n)}

    def balanced() -> bool:
        sets = [m.assigned_tps for m in trio]
        union = set().union(*sets)
        return (
            union == every and sum(map(len, sets)) == len(every) and all(len(s) == 3 for s in sets)
        )

    wait_until(
        balanced, 20, tick=members.tick, interval=0,
        describe=lambda: "; ".join(f"{m.name}={sorted(m.assigned_tps)}" for m in trio),
        what="9 partitions of two topics to be dealt 3 a member",
    )  # fmt: skip
    desc = wait_until(
        lambda: (d := describe(admin, group_id)).state == ConsumerGroupState.STABLE and d,
        15,
        tick=members.tick,
        interval=0.2,
        what="the group to be described Stable",
    )
    assert desc.partition_assignor == "uniform"


def test_regex_subscription_follows_topics_created_later(
    server: ServerProcess, members: ConfluentMembers, group_id: str, admin: AdminClient
) -> None:
    prefix = f"rx-{group_id[-6:]}"
    first, second = f"{prefix}-a", f"{prefix}-b"
    created = admin.create_topics([NewTopic(first, 4)], request_timeout=10)
    created[first].result(CALL_TIMEOUT_S)
    # ConsumerGroupHeartbeat v1 carries the pattern; the coordinator resolves it (RE2 syntax,
    # full match), again whenever topics are created.
    pair = consumer_members(members, 2, topics=(f"^{prefix}-.*",))

    def covered(topics: dict[str, int]) -> bool:
        sets = [m.assigned_tps for m in pair]
        every = {(t, p) for t, n in topics.items() for p in range(n)}
        per = sum(topics.values()) // 2
        return set().union(*sets) == every and all(len(s) == per for s in sets)

    def state() -> str:
        return "; ".join(f"{m.name}={sorted(m.assigned_tps)}" for m in pair)

    wait_until(
        lambda: covered({first: 4}), 20, tick=members.tick, interval=0, describe=state,
        what="the pattern's one topic to be split",
    )  # fmt: skip
    held = {m.name: m.assigned_tps for m in pair}
    admin.create_topics([NewTopic(second, 2)], request_timeout=10)[second].result(CALL_TIMEOUT_S)
    wait_until(
        lambda: covered({first: 4, second: 2}), 20, tick=members.tick, interval=0,
        describe=state, what="the new topic to be assigned",
    )  # fmt: skip
    for m in pair:
        assert held[m.name] < m.assigned_tps  # the new topic came on top, nothing moved
    log = wait_log(server, settled_with(group_id, 2), what="a Stable rebalance with 2 members")
    assert epoch_bumps(log, group_id)[-1][1] == "topics matching a subscription pattern appeared"
    described = describe_consumer_group(server.bootstrap, group_id)
    # librdkafka sends its patterns joined as "(p1)|(p2)|...".
    assert {m.subscribed_topic_regex for m in described.members} == {f"(^{prefix}-.*)"}
    assert {tuple(m.subscribed_topic_names) for m in described.members} == {()}


def _only_error(consumer: Consumer) -> KafkaError:
    """The one error a consumer subscribed to TOPIC reports while polling."""
    errors: list[KafkaError] = []
    consumer.subscribe([TOPIC])

    def poll() -> bool:
        msg = consumer.poll(0.05)
        if msg is not None and msg.error() is not None:
            errors.append(msg.error())
        return bool(errors)

    wait_until(poll, 15, interval=0, what="the consumer to report an error")
    (error,) = errors
    return error


def test_unknown_server_assignor_is_a_fatal_error_the_client_reports(
    server: ServerProcess, group_id: str
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id,
            "client.id": "cgp-bad-assignor",
            "group.protocol": "consumer",
            "group.remote.assignor": "no-such-assignor",
            "logger": RDKAFKA_LOG,
        }
    )
    try:
        error = _only_error(consumer)
        # librdkafka treats UNSUPPORTED_ASSIGNOR as fatal: the consumer is unusable and says
        # why (the broker's error, as librdkafka words error code 112), as an error event of
        # code _FATAL.
        assert error.code() == KafkaError._FATAL, error
        assert KafkaError(KafkaError.UNSUPPORTED_ASSIGNOR).str() in error.str(), error
        assert consumer.assignment() == []
    finally:
        consumer.close()
    # The refused heartbeat changed nothing: no group was created.
    assert not group_lines(server.log, group_id, "created")
    assert describe_consumer_group(server.bootstrap, group_id).error_code == (
        ErrorCode.GROUP_ID_NOT_FOUND
    )


@pytest.mark.parametrize(
    "kafka_server",
    [{"group.coordinator.rebalance.protocols": "classic"}],
    indirect=True,
    ids=["classic-only"],
)
def test_a_broker_without_the_consumer_protocol_is_a_fatal_error_classic_still_works(
    server: ServerProcess, members: ConfluentMembers, group_id: str
) -> None:
    # A Kafka 4 broker with group.coordinator.rebalance.protocols=classic answers
    # ConsumerGroupHeartbeat UNSUPPORTED_VERSION; librdkafka gives up on the consumer (fatal,
    # naming the API), where a user learns to set group.protocol=classic.
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id,
            "client.id": "cgp-classic-only",
            "group.protocol": "consumer",
            "logger": RDKAFKA_LOG,
        }
    )
    try:
        error = _only_error(consumer)
        assert error.code() == KafkaError._FATAL, error
        assert "ConsumerGroupHeartbeat" in error.str(), error
        assert KafkaError(KafkaError.UNSUPPORTED_VERSION).str() in error.str(), error
    finally:
        consumer.close()
    assert not group_lines(server.log, group_id, "created")
    # The same group with the classic protocol is served.
    classic = members.add(protocol="classic")
    members.wait_cover([classic])


def test_describe_and_list_tell_consumer_groups_from_classic_ones(
    server: ServerProcess, members: ConfluentMembers, group_id: str, admin: AdminClient
) -> None:
    trio = consumer_members(members, 3)
    classic_id = group_id + "-classic"
    classic = ConfluentMembers(server.bootstrap, classic_id, prefix="classic")
    try:
        pair = classic.add_many(2)  # the classic protocol, librdkafka's "range"
        members.wait_cover(trio)
        classic.wait_cover(pair)
        members.tick()

        desc = wait_until(
            lambda: (d := describe(admin, group_id)).state == ConsumerGroupState.STABLE and d,
            15,
            tick=lambda: (members.tick(), classic.tick()),
            interval=0.2,
            what="ConsumerGroupDescribe to say Stable",
        )
        assert desc.type == ConsumerGroupType.CONSUMER
        assert desc.group_id == group_id
        assert desc.is_simple_consumer_group is False
        assert desc.partition_assignor == "uniform"
        assert desc.coordinator.port == server.port
        by_id = {m.member_id: m for m in desc.members}
        assert set(by_id) == {m.member_id for m in trio}
        for m in trio:
            described = by_id[m.member_id]
            assert described.client_id == m.name
            assert described.host.lstrip("/") == "127.0.0.1"
            assert described.group_instance_id is None
            parts = described.assignment.topic_partitions
            assert {tp.topic for tp in parts} == {TOPIC}
            assert frozenset(tp.partition for tp in parts) == m.assignment
            target = described.target_assignment.topic_partitions
            assert frozenset(tp.partition for tp in target) == m.assignment

        cdesc = wait_until(
            lambda: (d := describe(admin, classic_id)).state == ConsumerGroupState.STABLE and d,
            15,
            tick=classic.tick,
            interval=0.2,
            what="the classic group to be described Stable",
        )
        assert cdesc.type == ConsumerGroupType.CLASSIC
        assert cdesc.partition_assignor == "range"
        assert {m.member_id for m in cdesc.members} == {m.member_id for m in pair}

        everything = listed(admin)
        assert everything[group_id].type == ConsumerGroupType.CONSUMER
        assert everything[classic_id].type == ConsumerGroupType.CLASSIC
        consumers = listed(admin, types={ConsumerGroupType.CONSUMER})
        assert group_id in consumers and classic_id not in consumers
        classics = listed(admin, types={ConsumerGroupType.CLASSIC})
        assert classic_id in classics and group_id not in classics
        stable = listed(
            admin, types={ConsumerGroupType.CONSUMER}, states={ConsumerGroupState.STABLE}
        )
        assert group_id in stable
        assert group_id not in listed(admin, states={ConsumerGroupState.EMPTY})
    finally:
        classic.close_all()

    members.close_all()
    wait_until(
        lambda: (
            (g := listed(admin).get(group_id)) is not None and g.state == ConsumerGroupState.EMPTY
        ),
        15,
        interval=0.2,
        what="the group to be listed Empty after everyone left",
    )
    assert group_id in listed(admin, types={ConsumerGroupType.CONSUMER})
    missing = describe(admin, group_id + "-missing")
    assert missing.state == ConsumerGroupState.DEAD and missing.members == []


# -- a server restart -------------------------------------------------------------------------

RESTART_CONFIGS = {
    # Short, so that waiting past one session timeout after the restart proves the members
    # heartbeat to the new process (a member that did not would be fenced by then).
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.heartbeat.interval.ms": 300,
}


class Restartable:
    """One data directory and port served by successive server processes, as a broker
    restarting under its clients."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self.processes: list[ServerProcess] = []

    def start(self) -> ServerProcess:
        server = start_server_process(
            RESTART_CONFIGS,
            [(TOPIC, PARTITIONS)],
            timeout=20,
            data_dir=self.data_dir,
            port=self.port,
        )
        self.processes.append(server)
        self.port = server.port
        return server

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def restartable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Restartable]:
    node = Restartable(tmp_path / "data")
    yield node
    for server in node.processes:
        server.kill()
    failed = any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )
    logs = [server.log for server in node.processes]
    if failed:
        for i, log in enumerate(logs):
            print(f"---- minicoord log of process {i} (tail) ----")
            print("\n".join(log.splitlines()[-60:]))
        return
    bad = [line for log in logs for line in log.splitlines() if _BAD_LINE.search(line)]
    assert not bad, "server logged problems:\n" + "\n".join(bad[:20])


def test_server_restart_keeps_assignments_member_epochs_and_offsets(
    restartable: Restartable, group_id: str
) -> None:
    first = restartable.start()
    members = ConfluentMembers(restartable.bootstrap, group_id, prefix="cgp-restart")
    try:
        trio = consumer_members(members, 3)
        members.wait_cover(trio)
        wait_log(first, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
        for m in trio:
            offsets = [TopicPartition(TOPIC, p, 1000 + p) for p in sorted(m.assignment)]
            result = m.consumer.commit(offsets=offsets, asynchronous=False) or []
            assert all(tp.error is None for tp in result), result
        before = describe_consumer_group(restartable.bootstrap, group_id)
        assert before.group_state == "Stable"
        assignments = owned(trio)
        events = {m.name: list(m.events) for m in trio}

        assert first.stop() == 0, first.log  # SIGTERM: a clean shutdown
        members.settle(1.0)  # the members lose their coordinator and keep trying
        second = restartable.start()
        wait_log(second, lambda log: "loaded offsets partition" in log, what="the load")
        # Past a whole session timeout (3 s) of the new process: members that did not
        # heartbeat to it would have been fenced, and the others would have rebalanced.
        members.settle(RESTART_CONFIGS["group.consumer.session.timeout.ms"] / 1000 + 1.5)

        after = describe_consumer_group(restartable.bootstrap, group_id)
        assert after.group_state == "Stable", after
        assert (after.group_epoch, after.assignment_epoch) == (
            before.group_epoch,
            before.assignment_epoch,
        )
        assert member_epochs(after) == member_epochs(before)
        assert owned(trio) == assignments
        assert {m.name: m.events for m in trio} == events, "a member saw a rebalance"
        assert epoch_bumps(second.log, group_id) == [], second.log
        assert not group_lines(second.log, group_id, "timed out"), second.log

        # The offsets committed before the restart; then commits under the restored member
        # epochs are accepted (a stale epoch would be refused).
        wanted = [TopicPartition(TOPIC, p) for p in sorted(ALL)]
        for m in trio:
            got = m.consumer.committed(wanted, timeout=CALL_TIMEOUT_S)
            assert {tp.partition: tp.offset for tp in got} == {p: 1000 + p for p in ALL}
        for m in trio:
            offsets = [TopicPartition(TOPIC, p, 2000 + p) for p in sorted(m.assignment)]
            result = m.consumer.commit(offsets=offsets, asynchronous=False) or []
            assert all(tp.error is None for tp in result), result
        got = trio[0].consumer.committed(wanted, timeout=CALL_TIMEOUT_S)
        assert {tp.partition: tp.offset for tp in got} == {p: 2000 + p for p in ALL}
    finally:
        members.close_all()


def test_a_regex_group_carries_on_across_a_restart(tmp_path: Path, group_id: str) -> None:
    """A data-dir server restarted under a group subscribed by pattern: its records (the
    resolved pattern among them) replay, so the members keep their epochs and partitions with
    no callback, and the topics are served after the restart as before."""
    data = tmp_path / "data"
    servers = [start_server_process(SHORT_SESSION, [(TOPIC, PARTITIONS)], data_dir=data)]
    group = ConfluentMembers(servers[0].bootstrap, group_id, prefix="cgp-rx")
    try:
        pair = consumer_members(group, 2, topics=(f"^{TOPIC}$",))
        group.wait_cover(pair)
        before = describe_consumer_group(servers[0].bootstrap, group_id)
        held, seen = owned(pair), {m.name: len(m.events) for m in pair}
        assert servers[0].stop() == 0, servers[0].log

        servers.append(
            start_server_process(
                SHORT_SESSION, [(TOPIC, PARTITIONS)], data_dir=data, port=int(servers[0].port)
            )
        )
        restarted = servers[1]
        wait_log(restarted, lambda log: "loaded offsets partition" in log, what="the group")
        # Acknowledged: the topic's partitions loaded too (the offsets partitions load first).
        producer = Producer({"bootstrap.servers": restarted.bootstrap, "logger": RDKAFKA_LOG})
        producer.produce(TOPIC, b"after the restart", partition=0)
        assert producer.flush(15) == 0
        # Two session timeouts of heartbeats on the restored group.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            group.tick()
        after = describe_consumer_group(restarted.bootstrap, group_id)
        assert after.error_code == 0
        assert member_epochs(after) == member_epochs(before)
        assert {m.subscribed_topic_regex for m in after.members} == {f"(^{TOPIC}$)"}
        assert owned(pair) == held
        assert {m.name: len(m.events) for m in pair} == seen
        assert "Traceback" not in restarted.log and " ERROR " not in restarted.log
    finally:
        group.close_all()
        for server in servers:
            server.stop()
    assert servers[1].proc.returncode == 0, servers[1].log
