"""A stable group of stock clients across a server restart (SIGTERM, same port and data dir).

The group's metadata record brings it back Stable at its generation with its members, each
with a fresh session: members that keep heartbeating carry on with no rebalance at all (no
assignment callback on any member, no new generation in the coordinator's log) and their
offsets are there; a member that never comes back is expired by its session timeout and the
others rebalance. The members are confluent-kafka consumers in child processes
(durability_member.py), so one can be SIGKILLed while the server is down.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from durakit import Node

pytestmark = pytest.mark.timeout(120)

TOPIC = "restart6"
PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 300
TIMINGS = (str(SESSION_MS), str(HEARTBEAT_MS))
CHILD = Path(__file__).resolve().parent / "durability_member.py"
_GENERATION = re.compile(r"group (\S+): generation (\d+) with (\d+) members")
_STABLE = re.compile(r"group (\S+): generation (\d+) is Stable with (\d+) members")


class Member:
    """One durability_member.py process and the events it reported."""

    def __init__(self, node: Node, group: str, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), node.bootstrap, group, TOPIC, name, *TIMINGS],
            stdin=subprocess.PIPE,
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
            with self._lock:
                self.events.append(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == kind]

    @property
    def assignment(self) -> frozenset[int]:
        with self._lock:
            for event in reversed(self.events):
                if event["event"] == "assign":
                    return frozenset(event["partitions"])
                if event["event"] == "revoke":
                    return frozenset()
        return frozenset()

    @property
    def member_id(self) -> str:
        assigns = self.of("assign")
        assert assigns, f"{self.name} was never assigned"
        return str(assigns[-1]["member_id"])

    def request(self, command: dict[str, Any], answer: str, timeout: float = 20) -> dict[str, Any]:
        before = len(self.of(answer))
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        wait_until(lambda: len(self.of(answer)) > before, timeout, f"{self.name}: {answer}")
        return self.of(answer)[before]

    def commit(self, offsets: dict[int, int]) -> None:
        reply = self.request({"cmd": "commit", "offsets": offsets}, "committed")
        assert reply["error"] is None, f"{self.name}: {reply}"

    def fetch(self) -> dict[int, int]:
        reply = self.request({"cmd": "fetch", "partitions": list(range(PARTITIONS))}, "fetched")
        assert reply["error"] is None, f"{self.name}: {reply}"
        return {int(p): o for p, o in reply["offsets"].items()}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('{"cmd": "quit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()

    def describe(self) -> str:
        return f"{self.name}: events {self.events[-6:]} stderr {''.join(self.stderr[-10:])}"


def wait_until(predicate: Any, timeout: float, what: str, describe: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.05) + 100):
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what}. {describe() if describe else ''}"
    )


def generations(log: str, group: str) -> list[tuple[int, int]]:
    return [(int(m[2]), int(m[3])) for m in _GENERATION.finditer(log) if m[1] == group]


def stable(log: str, group: str) -> list[tuple[int, int]]:
    return [(int(m[2]), int(m[3])) for m in _STABLE.finditer(log) if m[1] == group]


def rebalance_lines(log: str, group: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if (
            f"group {group}: " in line
            and ("generation" in line or "preparing rebalance" in line or "timed out" in line)
        )
        or f"rebalance group={group} " in line  # the structured line of a finished rebalance
    ]


def log_time(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def start_stable_group(node: Node, group: str, members: list[Member]) -> int:
    """Wait for one Stable generation of all members covering the topic; returns it."""

    def settled() -> int | None:
        gens = generations(node.log, group)
        if not gens or gens[-1][1] != len(members):
            return None
        if (gens[-1][0], len(members)) not in stable(node.log, group):
            return None
        parts = [p for m in members for p in m.assignment]
        if sorted(parts) != list(range(PARTITIONS)):
            return None
        return gens[-1][0]

    generation = wait_until(
        settled, 40, "a Stable generation of all members", lambda: describe(node, members)
    )
    sizes = sorted(len(m.assignment) for m in members)
    assert sizes == [PARTITIONS // len(members)] * len(members), describe(node, members)
    return int(generation)


def describe(node: Node, members: list[Member]) -> str:
    return "\n".join([m.describe() for m in members] + node.log.splitlines()[-20:])


@pytest.fixture
def members() -> Any:
    started: list[Member] = []
    yield started
    for m in started:
        m.close()
    for m in started:
        m.kill()


def test_restart_keeps_stable_group_without_rebalance(node_factory: Any, members: Any) -> None:
    group = "durability-restart-stable"
    node: Node = node_factory({}, [(TOPIC, PARTITIONS)])
    node.start()
    members.extend(Member(node, group, f"m{i}") for i in range(3))
    generation = start_stable_group(node, group, members)
    for m in members:
        m.commit({p: 1000 + p for p in m.assignment})
    assignments = {m.name: m.assignment for m in members}
    callbacks = {m.name: (len(m.of("assign")), len(m.of("revoke"))) for m in members}

    node.stop()
    time.sleep(1.0)
    node.start()
    restarted_at = time.monotonic()
    loaded = wait_until(
        lambda: re.search(
            r"loaded offsets partition \d+: \d+ records, 1 groups, 6 offsets", node.log
        ),
        10,
        "the group's partition to load",
        lambda: node.log,
    )
    assert loaded
    # Past a whole session timeout: a member that stopped heartbeating would be gone by now.
    time.sleep(max(0.0, restarted_at + (SESSION_MS + 2500) / 1000 - time.monotonic()))

    assert all(m.proc.poll() is None for m in members), describe(node, members)
    assert {m.name: (len(m.of("assign")), len(m.of("revoke"))) for m in members} == callbacks, (
        describe(node, members)
    )
    assert {m.name: m.assignment for m in members} == assignments
    assert rebalance_lines(node.log, group) == [], node.log
    # The restored offsets, fetched by each member; then a commit under the restored
    # generation and member ids is accepted (a stale generation would be refused).
    expected = {p: 1000 + p for p in range(PARTITIONS)}
    for m in members:
        assert m.fetch() == expected, m.name
    for m in members:
        m.commit({p: 2000 + p for p in m.assignment})
    assert members[0].fetch() == {p: 2000 + p for p in range(PARTITIONS)}
    assert rebalance_lines(node.log, group) == [], node.log
    assert generations(node.processes[0].log, group)[-1][0] == generation


def test_member_gone_across_restart_is_expired_and_the_rest_rebalance(
    node_factory: Any, members: Any
) -> None:
    group = "durability-restart-expire"
    node: Node = node_factory({}, [(TOPIC, PARTITIONS)])
    node.start()
    members.extend(Member(node, group, f"m{i}") for i in range(3))
    generation = start_stable_group(node, group, members)
    for m in members:
        m.commit({p: 500 + p for p in m.assignment})
    survivors, gone = members[:2], members[2]
    gone_id = gone.member_id

    node.stop()
    gone.kill()  # never comes back: no LeaveGroup, no heartbeat to the new process
    node.start()

    def rebalanced() -> bool:
        log = node.log
        return (generation + 1, 2) in stable(log, group) and sorted(
            p for m in survivors for p in m.assignment
        ) == list(range(PARTITIONS))

    wait_until(rebalanced, SESSION_MS / 1000 + 15, "the rebalance", lambda: describe(node, members))
    log = node.log
    # Exactly one new generation, of the two members left, caused by the session timeout.
    assert generations(log, group) == [(generation + 1, 2)], log
    assert sorted(len(m.assignment) for m in survivors) == [3, 3]
    lines = log.splitlines()
    expired = [line for line in lines if f"member {gone_id} session timed out after" in line]
    assert len(expired) == 1, log
    loaded = [line for line in lines if "loaded offsets partition" in line]
    assert len(loaded) == 1, log
    waited = log_time(expired[0]) - log_time(loaded[0])
    assert SESSION_MS / 1000 - 0.1 <= waited <= SESSION_MS / 1000 + 2.0, (waited, log)
    assert not [line for line in lines if "timed out after" in line and gone_id not in line], log
    # The offsets from before the restart, the departed member's partitions included.
    assert survivors[0].fetch() == {p: 500 + p for p in range(PARTITIONS)}
