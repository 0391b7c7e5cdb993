"""Keyed timers on an injected clock.

Scheduling a key again replaces its deadline; cancelling forgets it. Entries superseded in
the heap are skipped lazily when they surface, so schedule and cancel are O(log n) / O(1).
The queue never reads a clock: the shell asks `next_deadline()` and calls `pop_due(now)`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Any

TimerCallback = Callable[[int], Any]


class TimerQueue:
    __slots__ = ("_heap", "_live", "_seq", "changed")

    def __init__(self) -> None:
        # One entry per scheduling, [deadline, seq, key, callback, args], in the heap and (while
        # it is the key's current one) in `_live`. The heap orders entries by deadline, then
        # seq, which is unique, so a key is never compared. A superseded or cancelled entry
        # stays in the heap until it surfaces, with its key, callback and args dropped at once:
        # what waits there is a small husk, not a member's key and arguments.
        self._heap: list[list[Any]] = []
        self._live: dict[Hashable, list[Any]] = {}
        self._seq = itertools.count()
        # Set by every schedule and cancel; the shell clears it when it re-reads the earliest
        # deadline, so it knows when it need not.
        self.changed = False

    def schedule(
        self,
        key: Hashable,
        deadline: int,
        callback: TimerCallback,
        args: tuple[Any, ...] | None = None,
    ) -> None:
        """Call `callback(now)` (or `callback(now, *args)`) once `deadline` has passed.

        `args` lets one shared callback serve thousands of keys without a closure each.
        """
        entry = [deadline, next(self._seq), key, callback, args]
        old = self._live.get(key)
        if old is not None:
            _retire(old)
        self._live[key] = entry
        heapq.heappush(self._heap, entry)
        self.changed = True
        # Superseded and cancelled entries wait in the heap until they surface (a member's
        # pending-join timer, cancelled when it joins, would wait a whole session timeout):
        # rebuild once they are a fifth of it, which keeps them to about 100 bytes per four
        # members and costs O(1) per retirement, amortized.
        if len(self._heap) > 64 and 4 * len(self._heap) > 5 * len(self._live):
            self._heap = list(self._live.values())
            heapq.heapify(self._heap)

    def schedule_by(
        self,
        key: Hashable,
        deadline: int,
        callback: TimerCallback,
        args: tuple[Any, ...] | None = None,
    ) -> None:
        """`schedule`, unless the key is already due by `deadline`: one timer watching many
        deadlines (a group's member sessions) need only fire at the earliest, and a deadline
        that moves later costs no heap operation."""
        entry = self._live.get(key)
        if entry is None or entry[0] > deadline:
            self.schedule(key, deadline, callback, args)

    def cancel(self, key: Hashable) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            _retire(entry)
            self.changed = True

    def deadline_of(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def __len__(self) -> int:
        return len(self._live)

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            head = heap[0]
            if head[3] is not None:
                deadline: int = head[0]
                return deadline
            heapq.heappop(heap)
        return None

    def pop_due(self, now: int) -> list[TimerCallback]:
        """Remove and return the callbacks of every timer whose deadline is at or before now."""
        due: list[TimerCallback] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            _deadline, _seq, key, callback, args = heapq.heappop(heap)
            if callback is None:
                continue  # superseded or cancelled
            del self._live[key]
            if args is None:
                due.append(callback)
            else:
                due.append(lambda now, cb=callback, a=args: cb(now, *a))
        return due


def _retire(entry: list[Any]) -> None:
    """Mark an entry dead where it lies in the heap, dropping what it held."""
    entry[2] = entry[3] = entry[4] = None
