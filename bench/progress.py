"""Live counters from the Spark tasks to the driver: members started, settled, failed, and
requests done, so the progress line moves while a barrier stage runs.

Tasks run in Python workers of other processes, usually on other hosts, and Spark hands a
task's results (accumulators included) to the driver only when the task ends: a stage that
drives members for minutes would read "0/2 tasks" until its end. So every task sends its
counters to the driver twice a second, one UDP datagram each time, to a socket the driver
binds on the address of its own RPC endpoint (spark.driver.bindAddress, else
spark.driver.host), the address every executor already reaches.

Why UDP, not TCP or files under --out: a datagram carries the task's absolute counters, so a
lost or reordered one only delays the display and never skews a total; there is no
connection to open, retry or close; a send never blocks the members' event loop and cannot
fail a task, whether or not anyone listens. Files under --out would add a write per task per
half second to a shared file system and lag behind its attribute cache.

Everything here runs in the Python workers too: no pyspark at module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable, Hashable
from dataclasses import astuple, dataclass

INTERVAL_S = 0.5
MAX_DATAGRAM = 2048
RECEIVE_POLL_S = 0.2  # how soon the receiving thread notices `close`


@dataclass(frozen=True)
class Counters:
    # Per task 0 or 1: summed over a stage, how many tasks run and how many have ended
    # (Spark's own task counts lag: its status store is updated every few seconds).
    tasks: int = 0
    finished: int = 0
    members: int = 0  # this task's members so far (scale adds them wave by wave)
    started: int = 0  # sent their FindCoordinator
    settled: int = 0  # hold an assignment of a generation of their group's full size
    failed: int = 0
    requests: int = 0  # requests answered or failed, every member together

    def __add__(self, other: Counters) -> Counters:
        return Counters(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def encode(job: str, task: int, seq: int, counters: Counters) -> bytes:
    return json.dumps({"job": job, "task": task, "seq": seq, "c": astuple(counters)}).encode()


def decode(data: bytes) -> tuple[str, int, int, Counters] | None:
    """(job, task, seq, counters), or None for anything that is not such a message."""
    try:
        m = json.loads(data)
        return str(m["job"]), int(m["task"]), int(m["seq"]), Counters(*(int(x) for x in m["c"]))
    except (ValueError, KeyError, TypeError):
        return None


class ProgressBoard:
    """The driver's end: the latest counters of every task, per job. When it cannot bind
    (`error` says why), it stays empty and the tasks are given no address."""

    def __init__(self, host: str) -> None:
        self._latest: dict[tuple[str, int], tuple[int, Counters]] = {}
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self.address: tuple[str, int] | None = None
        self.error: OSError | None = None
        self._sock = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM
        )
        try:
            self._sock.bind((host.strip("[]"), 0))
        except OSError as exc:
            self.error = exc
            self._sock.close()
            self._thread = threading.Thread(target=lambda: None)
            return
        self._sock.settimeout(RECEIVE_POLL_S)
        self.address = (host.strip("[]"), self._sock.getsockname()[1])
        self._thread = threading.Thread(target=self._receive, name="bench-progress", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closing.is_set():
            try:
                data = self._sock.recv(MAX_DATAGRAM)
            except TimeoutError:
                continue
            except OSError:
                return
            message = decode(data)
            if message is None:
                continue
            job, task, seq, counters = message
            with self._changed:
                seen = self._latest.get((job, task))
                if seen is None or seen[0] < seq:
                    self._latest[(job, task)] = (seq, counters)
                    self._changed.notify_all()

    def totals(self, job: str) -> Counters:
        with self._changed:
            return self._totals(job)

    def _totals(self, job: str) -> Counters:
        return sum((c for (j, _), (_, c) in self._latest.items() if j == job), Counters())

    def wait_until(self, job: str, accept: Callable[[Counters], bool], timeout: float) -> Counters:
        """The job's totals once `accept` takes them, or the last ones after `timeout`."""
        with self._changed:
            self._changed.wait_for(lambda: accept(self._totals(job)), timeout)
            return self._totals(job)

    def close(self) -> None:
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(RECEIVE_POLL_S * 10)
        self._sock.close()

    def __enter__(self) -> ProgressBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProgressSender:
    """A task's end: fire-and-forget datagrams to the board; silent when it is unreachable."""

    def __init__(self, board: tuple[str, int] | None, job: str, task: int) -> None:
        self.job = job
        self.task = task
        self._seq = 0
        self._sock: socket.socket | None = None
        if board is None:
            return
        try:
            family, _, _, _, dest = socket.getaddrinfo(*board, type=socket.SOCK_DGRAM)[0]
            sock = socket.socket(family, socket.SOCK_DGRAM)
        except OSError:
            return  # no progress display is no reason to fail a benchmark
        sock.setblocking(False)
        self._sock, self._dest = sock, dest

    def send(self, counters: Counters) -> None:
        if self._sock is None:
            return
        self._seq += 1
        with contextlib.suppress(OSError):
            self._sock.sendto(encode(self.job, self.task, self._seq, counters), self._dest)

    async def run(self, read: Callable[[], Counters], interval: float = INTERVAL_S) -> None:
        """Send `read()` every `interval` until cancelled."""
        if self._sock is None:
            return
        while True:
            self.send(read())
            await asyncio.sleep(interval)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class StallWatch:
    """Notices when a stage's progress has not moved for `after_s`, and when it moves again."""

    def __init__(self, after_s: float, now: float) -> None:
        self.after_s = after_s
        self.stalled = False
        self._seen: Hashable = None
        self._moved = now

    def observe(self, state: Hashable, now: float) -> bool | None:
        """True when this observation starts a stall, False when it ends one, else None."""
        if state != self._seen:
            self._seen, self._moved = state, now
            if self.stalled:
                self.stalled = False
                return False
            return None
        if not self.stalled and now - self._moved >= self.after_s:
            self.stalled = True
            return True
        return None
