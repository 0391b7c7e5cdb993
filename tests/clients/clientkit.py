"""Helpers shared by the stock-client tests: bounded waits, assignment checks, log parsing,
and members run in child processes (so that they can be SIGKILLed without a LeaveGroup).

Every wait here is a loop with both an iteration count and a deadline: a test that cannot
reach the state it waits for fails with the last state it saw, it never hangs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

TOPIC = "topic6"
PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))
HERE = Path(__file__).resolve().parent
CHILD_SCRIPT = HERE / "member_child.py"

# Timings shared by the tests: short enough that an eviction takes seconds, long enough
# that a busy 2-core machine does not miss heartbeats.
SESSION_MS = 6000
KILL_SESSION_MS = 3000
HEARTBEAT_MS = 300
METADATA_MAX_AGE_MS = 3000


class WaitTimeout(AssertionError):
    pass


def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    *,
    tick: Callable[[], None] | None = None,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
    what: str = "condition",
) -> Any:
    """Call `tick` then `predicate` until it is truthy; bounded by a deadline and a count."""
    deadline = time.monotonic() + timeout
    max_rounds = int(timeout / max(interval, 0.001)) + 10_000
    for _ in range(max_rounds):
        if tick is not None:
            tick()
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            break
        if interval:
            time.sleep(interval)
    state = describe() if describe else ""
    raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}. {state}")


async def async_wait_until(
    predicate: Callable[[], Any | Awaitable[Any]],
    timeout: float,
    *,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
    what: str = "condition",
) -> Any:
    """`wait_until` for the event loop: `predicate` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    max_rounds = int(timeout / max(interval, 0.001)) + 10_000
    for _ in range(max_rounds):
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(interval)
    state = describe() if describe else ""
    raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}. {state}")


def is_exact_cover(assignments: Iterable[Iterable[int]], partitions: int = PARTITIONS) -> bool:
    """True when the sets are pairwise disjoint and together hold every partition."""
    seen: list[int] = []
    for parts in assignments:
        seen.extend(parts)
    return len(seen) == partitions and set(seen) == set(range(partitions))


def assert_exact_cover(
    assignments: Mapping[str, Iterable[int]], partitions: int = PARTITIONS, *, each: int = 0
) -> None:
    """Disjoint, complete, and (when `each` is given) exactly `each` partitions per member."""
    sets = {name: sorted(parts) for name, parts in assignments.items()}
    seen = [p for parts in sets.values() for p in parts]
    assert sorted(seen) == list(range(partitions)), f"not an exact cover: {sets}"
    if each:
        assert all(len(parts) == each for parts in sets.values()), f"uneven: {sets}"


# -- the server's log ------------------------------------------------------------------------

_GENERATION = re.compile(r"group (\S+): generation (\d+) with (\d+) members")
_STABLE = re.compile(r"group (\S+): generation (\d+) is Stable with (\d+) members")


def generations(log: str, group: str) -> list[tuple[int, int]]:
    """(generation, member count) of each generation the coordinator handed out to `group`."""
    return [
        (int(m.group(2)), int(m.group(3))) for m in _GENERATION.finditer(log) if m.group(1) == group
    ]


def stable_generations(log: str, group: str) -> list[tuple[int, int]]:
    return [
        (int(m.group(2)), int(m.group(3))) for m in _STABLE.finditer(log) if m.group(1) == group
    ]


def group_lines(log: str, group: str, needle: str) -> list[str]:
    prefix = f"group {group}: "
    return [line for line in log.splitlines() if prefix in line and needle in line]


def stable_with(group: str, members: int) -> Callable[[str], bool]:
    """A log predicate: the group's latest Stable generation has `members` members."""

    def check(log: str) -> bool:
        stable = stable_generations(log, group)
        return bool(stable) and stable[-1][1] == members

    return check


def _log_if(server: Any, predicate: Callable[[str], bool]) -> str:
    log: str = server.log
    return log if predicate(log) else ""


def _log_tail(server: Any) -> str:
    return "server log tail:\n" + "\n".join(server.log.splitlines()[-15:])


def wait_log(
    server: Any, predicate: Callable[[str], bool], timeout: float = 10, what: str = "log"
) -> str:
    """The server's log once `predicate` holds for it.

    The log is read from the server's stderr by a thread, so a line can arrive a moment after
    the client saw the effect of what it reports: assertions on the log wait for it first.
    """
    return wait_until(
        lambda: _log_if(server, predicate),
        timeout,
        describe=lambda: _log_tail(server),
        what=what,
    )


async def async_wait_log(
    server: Any, predicate: Callable[[str], bool], timeout: float = 10, what: str = "log"
) -> str:
    """`wait_log` without blocking the event loop (the consumers' heartbeats run on it)."""
    return await async_wait_until(
        lambda: _log_if(server, predicate),
        timeout,
        describe=lambda: _log_tail(server),
        what=what,
    )


# -- members in child processes --------------------------------------------------------------


class ChildMember:
    """A consumer in its own process (member_child.py), reporting its assignment as JSON lines.

    Killing it with SIGKILL sends no LeaveGroup: the coordinator only learns of it when its
    session times out.
    """

    def __init__(self, client: str, bootstrap: str, group: str, **options: Any) -> None:
        args = [sys.executable, str(CHILD_SCRIPT), client, bootstrap, group, TOPIC]
        args.append(json.dumps(options))
        self.name = f"child-{client}"
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    @property
    def assignment(self) -> frozenset[int]:
        with self._lock:
            for event in reversed(self.events):
                if event["event"] == "assignment":
                    return frozenset(event["partitions"])
        return frozenset()

    @property
    def member_id(self) -> str | None:
        with self._lock:
            for event in reversed(self.events):
                if event.get("member_id"):
                    return str(event["member_id"])
        return None

    def describe(self) -> str:
        tail = "".join(self.stderr[-20:])
        return f"{self.name} alive={self.proc.poll() is None} events={self.events[-5:]} {tail}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
