"""kafka-python consumers and admin client against a real minicoord process.

Each member is a stock `kafka.KafkaConsumer` driven by a thread of its own that polls it; every
other use of the consumer (commit, committed, close) is handed to that thread, since a
KafkaConsumer is not safe to share between threads. The member killed without a LeaveGroup
runs in a child process.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from clientkit import (
    ALL,
    HEARTBEAT_MS,
    KILL_SESSION_MS,
    METADATA_MAX_AGE_MS,
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
from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.clients

# A member thread never outlives this, whatever happens to the test.
MEMBER_LIFETIME_S = 120


class Member(ConsumerRebalanceListener):
    """One KafkaConsumer and the thread polling it; records its rebalance callbacks."""

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
        self._assignment: frozenset[int] = frozenset()
        self.member_id: str | None = None
        kwargs: dict[str, Any] = {}
        if instance_id is not None:
            kwargs["group_instance_id"] = instance_id
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            # The rebalance timeout: a member that never rejoins holds a join phase this long.
            max_poll_interval_ms=20000,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            metadata_max_age_ms=METADATA_MAX_AGE_MS,
            fetch_max_wait_ms=100,
            request_timeout_ms=30000,
            **kwargs,
        )
        self.consumer.subscribe([TOPIC], listener=self)
        # Refresh metadata after subscribing and before the first poll (which joins).
        # kafka-python 3.0.12 otherwise joins before its metadata snapshot of the subscribed
        # topics is filled in; the leader then records an empty snapshot with its assignment,
        # rejoins as soon as the next metadata refresh "changes" it, and if a poll() times out
        # while that rejoin is in flight, the finished JoinGroup/SyncGroup is never completed:
        # no assignment callback, no heartbeats, evicted after the session timeout, and stuck.
        # A client bug (see the report), hidden on a real broker because
        # group.initial.rebalance.delay.ms holds the first join back for 3 s.
        assert TOPIC in self.consumer.topics()
        self._calls: queue.Queue[tuple[Callable[[KafkaConsumer], Any], Any]] = queue.Queue()
        self._stop = threading.Event()
        self.closed = False
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- ConsumerRebalanceListener (runs on the consumer's IO thread) -------------------------

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoke", frozenset(tp.partition for tp in revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assign", frozenset(tp.partition for tp in assigned)))

    def on_partitions_lost(self, lost: Any) -> None:
        self.events.append(("lost", frozenset(tp.partition for tp in lost)))

    # -- the member's thread --------------------------------------------------------------------

    def _run(self) -> None:
        deadline = time.monotonic() + MEMBER_LIFETIME_S
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                self.consumer.poll(timeout_ms=50)
                self._snapshot()
                self._serve_calls()
        except BaseException as exc:  # surfaced by the test through `error`
            self.error = exc
            traceback.print_exc()
        finally:
            self._serve_calls()

    def _snapshot(self) -> None:
        assert all(tp.topic == TOPIC for tp in self.consumer.assignment())
        self._assignment = frozenset(tp.partition for tp in self.consumer.assignment())
        member_id = self.consumer.group_metadata().member_id
        if member_id:
            self.member_id = member_id

    def _serve_calls(self) -> None:
        while True:
            try:
                fn, future = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(fn(self.consumer))
            except BaseException as exc:
                future.set_exception(exc)

    def call(self, fn: Callable[[KafkaConsumer], Any], timeout: float = 20) -> Any:
        """Run `fn(consumer)` on the member's thread and return its result."""
        assert self._thread.is_alive(), f"{self.name} thread is gone: {self.error!r}"
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._calls.put((fn, future))
        return future.result(timeout)

    @property
    def assignment(self) -> frozenset[int]:
        return frozenset() if self.closed else self._assignment

    def close(self) -> None:
        """KafkaConsumer.close(): sends LeaveGroup for a dynamic member."""
        if self.closed:
            return
        self.closed = True
        if self._thread.is_alive():
            self.call(self._close_on_thread)
        else:
            self.consumer.close(autocommit=False)
        self._stop.set()
        self._thread.join(10)

    def _close_on_thread(self, consumer: KafkaConsumer) -> None:
        self._stop.set()  # the thread's loop ends after this call
        consumer.close(autocommit=False)


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
