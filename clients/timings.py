"""Client-side timestamps of every request and every phase a simulated member goes through.

Recording sits on the hot path of a load generator driving tens of thousands of requests a
second from one Python thread, so a record is one tuple appended to a list, stamped with
`time.perf_counter()` (monotonic, cheap). `rows()` converts the stamps to Unix epoch seconds
with one offset taken per process, so rows from several processes (Spark tasks) on one
machine line up on a common time axis.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

# perf_counter() + EPOCH_OFFSET == time.time(), to a few microseconds.
EPOCH_OFFSET = time.time() - time.perf_counter()

KIND_REQUEST = "request"
KIND_PHASE = "phase"
KIND_ASSIGNMENT = "assignment"
KIND_GAUGE = "gauge"
KIND_MARK = "mark"


class Measurement(NamedTuple):
    kind: str  # request | phase | assignment | gauge | mark
    op: str  # API name (Heartbeat), phase name (join, rebalance), gauge name, or topic:partition
    group_id: str
    member: int  # the simulated member's index within the run (-1: none)
    group_size: int  # members in the group at this point, when known (0: unknown)
    generation: int
    start: float  # epoch seconds
    end: float  # epoch seconds
    latency_ms: float
    error: int  # Kafka error code (0: none); -1 for a client-side failure (timeout, closed)
    value: float  # a gauge's value, or a phase's count (e.g. JoinGroup round trips)


class Recorder:
    """Collects measurements of one process (one Spark task, one test)."""

    __slots__ = ("_rows", "requests")

    def __init__(self) -> None:
        self._rows: list[tuple] = []
        # Requests recorded over the recorder's life, kept across clear(): a progress
        # display reads it while rows are being handed off in batches.
        self.requests = 0

    def request(
        self, api: str, group_id: str, member: int, t0: float, t1: float, error: int
    ) -> None:
        self.requests += 1
        self._rows.append((KIND_REQUEST, api, group_id, member, 0, 0, t0, t1, error, 0.0))

    def phase(
        self,
        op: str,
        group_id: str,
        member: int,
        t0: float,
        t1: float,
        *,
        group_size: int = 0,
        generation: int = 0,
        error: int = 0,
        value: float = 0.0,
    ) -> None:
        self._rows.append(
            (KIND_PHASE, op, group_id, member, group_size, generation, t0, t1, error, value)
        )

    def add(
        self,
        kind: str,
        op: str,
        group_id: str = "",
        member: int = -1,
        *,
        t0: float | None = None,
        t1: float | None = None,
        group_size: int = 0,
        generation: int = 0,
        error: int = 0,
        value: float = 0.0,
    ) -> None:
        now = time.perf_counter()
        start = now if t0 is None else t0
        end = start if t1 is None else t1
        self._rows.append(
            (kind, op, group_id, member, group_size, generation, start, end, error, value)
        )

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        self._rows.clear()

    def rows(self) -> Iterator[Measurement]:
        """Every measurement so far, stamps converted to epoch seconds."""
        offset = EPOCH_OFFSET
        for kind, op, group_id, member, size, gen, t0, t1, error, value in self._rows:
            yield Measurement(
                kind,
                op,
                group_id,
                member,
                size,
                gen,
                t0 + offset,
                t1 + offset,
                (t1 - t0) * 1000.0,
                error,
                value,
            )

    def select(self, kind: str, op: str | None = None) -> list[Measurement]:
        return [m for m in self.rows() if m.kind == kind and (op is None or m.op == op)]
