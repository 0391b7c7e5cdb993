"""TimerQueue: keyed timers on an injected clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minicoord.server.coordinator.timers import TimerQueue


def tagged(log: list[Any], tag: Any) -> Callable[[int], Any]:
    def callback(now: int) -> Any:
        log.append((tag, now))
        return tag

    return callback


def fire(queue: TimerQueue, now: int) -> list[Any]:
    return [cb(now) for cb in queue.pop_due(now)]


def test_empty_queue() -> None:
    q = TimerQueue()
    assert q.next_deadline() is None
    assert q.pop_due(10**12) == []
    assert len(q) == 0
    assert "k" not in q


def test_pop_due_returns_callbacks_in_deadline_order() -> None:
    q = TimerQueue()
    log: list[Any] = []
    q.schedule("c", 30, tagged(log, "c"))
    q.schedule("a", 10, tagged(log, "a"))
    q.schedule("b", 20, tagged(log, "b"))
    assert q.next_deadline() == 10
    assert fire(q, 25) == ["a", "b"]
    assert log == [("a", 25), ("b", 25)]
    assert len(q) == 1
    assert q.next_deadline() == 30
    assert fire(q, 29) == []
    assert fire(q, 30) == ["c"]  # due at exactly its deadline
    assert q.next_deadline() is None


def test_equal_deadlines_fire_in_scheduling_order() -> None:
    q = TimerQueue()
    for key in ("x", "y", "z"):
        q.schedule(key, 5, tagged([], key))
    assert fire(q, 5) == ["x", "y", "z"]


def test_schedule_again_replaces_the_deadline() -> None:
    q = TimerQueue()
    q.schedule("k", 10, tagged([], "old"))
    q.schedule("k", 50, tagged([], "new"))
    assert len(q) == 1
    assert q.deadline_of("k") == 50
    assert q.next_deadline() == 50  # the superseded entry at 10 is skipped
    assert fire(q, 10) == []
    assert fire(q, 50) == ["new"]
    assert "k" not in q


def test_replacing_with_an_earlier_deadline() -> None:
    q = TimerQueue()
    q.schedule("k", 50, tagged([], "late"))
    q.schedule("k", 5, tagged([], "early"))
    assert q.next_deadline() == 5
    assert fire(q, 100) == ["early"]  # the stale entry at 50 does not fire too
    assert fire(q, 1000) == []


def test_cancel_forgets_a_key() -> None:
    q = TimerQueue()
    q.schedule("a", 10, tagged([], "a"))
    q.schedule("b", 20, tagged([], "b"))
    q.cancel("a")
    q.cancel("a")  # idempotent
    q.cancel("never-scheduled")
    assert "a" not in q
    assert q.deadline_of("a") is None
    assert q.next_deadline() == 20
    assert fire(q, 100) == ["b"]


def test_cancel_then_reschedule_same_key() -> None:
    q = TimerQueue()
    q.schedule("a", 10, tagged([], 1))
    q.cancel("a")
    q.schedule("a", 30, tagged([], 2))
    assert fire(q, 10) == []
    assert fire(q, 30) == [2]


def test_tuple_keys_are_distinct() -> None:
    q = TimerQueue()
    q.schedule(("heartbeat", "g", "m1"), 10, tagged([], "m1"))
    q.schedule(("heartbeat", "g", "m2"), 10, tagged([], "m2"))
    q.cancel(("heartbeat", "g", "m1"))
    assert fire(q, 10) == ["m2"]


def test_callback_scheduling_a_timer_does_not_disturb_pop() -> None:
    q = TimerQueue()
    fired: list[str] = []

    def first(now: int) -> None:
        fired.append("first")
        q.schedule("second", now, lambda t: fired.append("second"))

    q.schedule("first", 10, first)
    for cb in q.pop_due(10):
        cb(10)
    assert fired == ["first"]
    # Scheduled at an already-due time: the next pop returns it.
    for cb in q.pop_due(10):
        cb(10)
    assert fired == ["first", "second"]


def test_heap_is_rebuilt_when_superseded_entries_dominate() -> None:
    q = TimerQueue()
    q.schedule("other", 1_000_000, tagged([], "other"))
    for i in range(1000):
        q.schedule("hot", 10_000 + i, tagged([], i))
    assert len(q) == 2
    # Without rebuilding the heap would hold 1001 entries; it stays within 4x the live ones
    # (plus the 64-entry floor below which it does not bother).
    assert len(q._heap) <= 64 + 1
    assert q.deadline_of("hot") == 10_999
    assert q.next_deadline() == 10_999
    assert fire(q, 10_998) == []
    assert fire(q, 10_999) == [999]
    assert fire(q, 1_000_000) == ["other"]
    assert len(q) == 0


def test_rebuild_keeps_every_live_key() -> None:
    q = TimerQueue()
    for k in range(20):
        q.schedule(k, 100 + k, tagged([], k))
    for _ in range(30):
        for k in range(3):
            q.schedule(k, 500 + k, tagged([], ("moved", k)))
    assert len(q) == 20
    assert len(q._heap) <= max(64, 4 * len(q)) + 1
    assert fire(q, 10_000) == [*range(3, 20), ("moved", 0), ("moved", 1), ("moved", 2)]


def test_next_deadline_discards_stale_heads() -> None:
    q = TimerQueue()
    q.schedule("a", 1, tagged([], "a"))
    q.schedule("b", 2, tagged([], "b"))
    q.cancel("a")
    assert q.next_deadline() == 2
    assert len(q._heap) == 1  # the cancelled head was dropped


def test_schedule_by_only_brings_a_deadline_forward() -> None:
    q = TimerQueue()
    q.schedule_by("g", 50, tagged([], "first"))
    q.schedule_by("g", 80, tagged([], "later"))  # already due by 80: unchanged
    assert q.deadline_of("g") == 50
    q.schedule_by("g", 20, tagged([], "sooner"))
    assert q.deadline_of("g") == 20 and len(q) == 1
    assert fire(q, 50) == ["sooner"]
    q.schedule_by("g", 90, tagged([], "again"))  # nothing armed after firing: armed anew
    assert fire(q, 90) == ["again"]
