"""KIP-1263 target assignment batching (group.consumer.assignment.interval.ms) on the clock:
the first computation is immediate, later ones wait out the interval (the group Assigning
meanwhile) and are then made by a timer, and many joins within one interval cost one
computation."""

from __future__ import annotations

from consumer_helpers import Harness
from minicoord.protocol.consumer_records import TYPES
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import record_type
from minicoord.server.config import Config

E = ErrorCode
INTERVAL = 100


def harness() -> Harness:
    return Harness(
        Config(
            group_consumer_heartbeat_interval_ms=500,
            group_consumer_session_timeout_ms=10_000,
            group_consumer_assignment_interval_ms=INTERVAL,
        ),
        foo=6,
    )


def target_computations(h: Harness) -> int:
    # ConsumerGroupTargetAssignmentMetadata records (type 6): one per computation.
    assert 6 in TYPES
    return sum(1 for _, r in h.records if record_type(r.key) == 6)


def test_the_first_target_is_immediate_and_a_later_one_waits_for_the_interval() -> None:
    h = harness()
    a = h.hb("a", 0)
    assert h.owned(a) == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.group().assignment_epoch == h.group().epoch
    h.tick(10)
    b = h.hb("b", 0)
    assert b.error is E.NONE
    group = h.group()
    # Batched: the group is Assigning; b reconciles toward the old target, which has nothing
    # for it yet.
    assert group.state.value == "Assigning" and group.assignment_epoch < group.epoch
    assert h.owned(b) == {}
    h.tick(INTERVAL - 11)
    assert h.group().assignment_epoch < h.group().epoch
    h.tick(1)  # the interval since the last computation is over: the timer computes
    group = h.group()
    assert group.assignment_epoch == group.epoch
    tid = h.tid("foo")
    assert sorted(len(t.get(tid, ())) for t in group.target.values()) == [3, 3]


def test_many_joins_within_an_interval_cost_one_computation() -> None:
    h = harness()
    h.hb("first", 0)
    before = target_computations(h)
    for i in range(50):
        h.tick(1)
        assert h.hb(f"m{i}", 0).error is E.NONE
    assert target_computations(h) == before  # all waiting for the interval
    h.tick(INTERVAL)
    assert target_computations(h) == before + 1
    group = h.group()
    assert group.assignment_epoch == group.epoch
    tid = h.tid("foo")
    # Six partitions over 51 members: six hold one each.
    held = sorted(p for t in group.target.values() for p in t.get(tid, ()))
    assert held == list(range(6))


def test_an_empty_groups_next_member_is_assigned_at_once() -> None:
    h = harness()
    h.hb("a", 0)
    h.tick(1)
    assert h.hb("a", -1).error is E.NONE
    h.tick(1)
    # KAFKA-20442: emptying the group resets the batching clock.
    out = h.hb("b", 0)
    assert h.owned(out) == {"foo": [0, 1, 2, 3, 4, 5]}
