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
    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, TimerCallback, tuple[Any, ...] | None]] = {}
        self._seq = itertools.count()

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
        seq = next(self._seq)
        self._live[key] = (seq, deadline, callback, args)
        heapq.heappush(self._heap, (deadline, seq, key))
        # Superseded entries pile up when one key is rescheduled often; rebuild before they
        # dominate the heap.
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
            self._heap = [(d, s, k) for k, (s, d, _, _) in self._live.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def deadline_of(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry[1] if entry else None

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def __len__(self) -> int:
        return len(self._live)

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[0] == seq:
                return deadline
            heapq.heappop(heap)
        return None

    def pop_due(self, now: int) -> list[TimerCallback]:
        """Remove and return the callbacks of every timer whose deadline is at or before now."""
        due: list[TimerCallback] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            _deadline, seq, key = heapq.heappop(heap)
            entry = self._live.get(key)
            if entry is not None and entry[0] == seq:
                del self._live[key]
                callback, args = entry[2], entry[3]
                if args is None:
                    due.append(callback)
                else:
                    due.append(lambda now, cb=callback, a=args: cb(now, *a))
        return due
