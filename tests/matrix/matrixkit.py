"""Helpers for the client-matrix tests: group members of any client in child processes, bounded
waits, the assignments the standard assignors must produce, and what the coordinator says.

Every member runs in its own process and reports as JSON lines on stdout (node/member.mjs,
py_member.py) or, for kcat, through its rebalance lines on stderr, turned into the same events.
Every wait is a loop bounded by both a count and a deadline; a wait that fails names the last
state it saw, the members' own logs and the coordinator's.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"
NODE_MEMBER = NODE_DIR / "member.mjs"
PY_MEMBER = HERE / "py_member.py"

TOPIC = "topic6"
PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))

# Short enough that a lost member is noticed in seconds; long enough for a busy 2-core machine.
SESSION_MS = 6000
HEARTBEAT_MS = 500
REBALANCE_MS = 15000


class WaitTimeout(AssertionError):
    pass


def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    *,
    interval: float = 0.1,
    describe: Callable[[], str] | None = None,
    what: str = "condition",
) -> Any:
    """Call `predicate` until it is truthy; bounded by a deadline and a number of rounds."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 10):
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    state = describe() if describe else ""
    raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}.\n{state}")


# -- members -----------------------------------------------------------------------------------


class Member:
    """A group member in a child process; `events` are the JSON events it reported."""

    def __init__(self, name: str, args: Sequence[str], *, cwd: Path | None = None) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            list(args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
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
                with self._lock:
                    self.stderr.append(f"(stdout) {line}")
                continue
            self._add(event)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line)

    def _add(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    @property
    def assignment(self) -> frozenset[int]:
        """The partitions it owns now: its last assignment, unless revoked since."""
        owned: frozenset[int] = frozenset()
        for event in self.snapshot():
            if event["event"] == "assigned":
                owned = frozenset(event["partitions"])
            elif event["event"] == "revoked":
                owned = frozenset()
        return owned

    @property
    def member_id(self) -> str | None:
        for event in reversed(self.snapshot()):
            if event.get("member_id"):
                return str(event["member_id"])
        return None

    def count(self, kind: str) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == kind)

    def errors(self) -> list[str]:
        return [str(e.get("message")) for e in self.snapshot() if e["event"] == "error"]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def commit(self, offsets: Mapping[int, int], timeout: float = 20) -> dict[str, Any]:
        """Have the member commit `offsets` of TOPIC; its commit event (ok or not)."""
        before = self.count("commit")
        self.send({"cmd": "commit", "offsets": {str(p): o for p, o in offsets.items()}})
        wait_until(
            lambda: self.count("commit") > before or not self.alive,
            timeout,
            describe=self.describe,
            what=f"{self.name} to report its commit",
        )
        commits = [e for e in self.snapshot() if e["event"] == "commit"]
        assert len(commits) > before, f"{self.name} exited before committing. {self.describe()}"
        return commits[before]

    def leave(self, timeout: float = 20) -> int:
        """Ask the member to leave the group and exit; its exit status."""
        self.ask_to_leave()
        return self.wait_exit(timeout)

    def wait_exit(self, timeout: float = 20) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise WaitTimeout(f"{self.name} did not exit. {self.describe()}") from exc

    def ask_to_leave(self) -> None:
        self.send({"cmd": "leave"})

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, the coordinator learns of it when its session expires."""
        if self.alive:
            self.proc.kill()
        self.proc.wait(10)

    def describe(self) -> str:
        events = self.snapshot()[-6:]
        with self._lock:
            tail = "".join(self.stderr[-25:])
        return (
            f"--- {self.name} (member {self.member_id}, alive={self.alive}, "
            f"rc={self.proc.returncode}) events={events}\n{tail}"
        )


def leave_all(members: Iterable[Member], timeout: float = 20) -> list[int]:
    """Ask every member to leave at once (no rebalance cascade in between); exit statuses."""
    members = list(members)
    for member in members:
        member.ask_to_leave()
    return [member.wait_exit(timeout) for member in members]


class NodeMember(Member):
    def __init__(self, client: str, bootstrap: str, group: str, **options: Any) -> None:
        args = ["node", str(NODE_MEMBER), client, bootstrap, group, TOPIC, json.dumps(options)]
        super().__init__(options.get("client_id", client), args, cwd=NODE_DIR)


class PyMember(Member):
    def __init__(self, client: str, bootstrap: str, group: str, **options: Any) -> None:
        args = [sys.executable, str(PY_MEMBER), client, bootstrap, group, TOPIC]
        super().__init__(options.get("client_id", client), [*args, json.dumps(options)])


_KCAT_REBALANCE = re.compile(
    r"^% Group (?P<group>\S+) rebalanced \(memberid (?P<member>\S*)\): "
    r"(?P<kind>assigned|revoked): ?(?P<parts>.*)$"
)
_KCAT_PARTITION = re.compile(r"(\S+) \[(\d+)\]")


class KcatMember(Member):
    """`kcat -G GROUP TOPIC`, the balanced consumer; its rebalance lines become events.

    It takes no commands: it leaves on SIGTERM, and commits by itself (auto commit).
    """

    def __init__(
        self,
        kcat: str,
        bootstrap: str,
        group: str,
        *,
        client_id: str = "matrix-kcat",
        session_ms: int = SESSION_MS,
        heartbeat_ms: int = HEARTBEAT_MS,
        assignor: str | None = None,
        debug: str | None = None,
        config: Mapping[str, object] | None = None,
    ) -> None:
        settings: dict[str, object] = {
            "client.id": client_id,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": heartbeat_ms,
            **(config or {}),
        }
        if assignor is not None:  # else librdkafka's default, "range,roundrobin"
            settings["partition.assignment.strategy"] = assignor
        args = [kcat, "-b", bootstrap, "-G", group]
        for key, value in settings.items():
            args += ["-X", f"{key}={value}"]
        if debug:
            args += ["-d", debug]
        super().__init__(client_id, [*args, TOPIC])
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line)
            match = _KCAT_REBALANCE.match(line.rstrip("\n"))
            if match:
                parts = sorted(
                    int(p) for t, p in _KCAT_PARTITION.findall(match["parts"]) if t == TOPIC
                )
                kind = match["kind"]
                self._add({"event": kind, "partitions": parts, "member_id": match["member"]})

    def ask_to_leave(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)

    def send(self, command: dict[str, Any]) -> None:
        raise NotImplementedError("kcat takes no commands")

    def log_lines(self, needle: str) -> list[str]:
        with self._lock:
            return [line for line in self.stderr if needle in line]


# -- what the assignors must produce -------------------------------------------------------------


def range_assignment(
    member_ids: Iterable[str], partitions: int = PARTITIONS
) -> dict[str, set[int]]:
    """Kafka's RangeAssignor over one topic: members sorted by id, consecutive runs."""
    ids = sorted(member_ids)
    per, extra = divmod(partitions, len(ids))
    result: dict[str, set[int]] = {}
    start = 0
    for i, member in enumerate(ids):
        size = per + (1 if i < extra else 0)
        result[member] = set(range(start, start + size))
        start += size
    return result


def roundrobin_assignment(
    member_ids: Iterable[str], partitions: int = PARTITIONS
) -> dict[str, set[int]]:
    """Kafka's RoundRobinAssignor over one topic: partition i to the (i mod n)-th sorted member."""
    ids = sorted(member_ids)
    return {m: {p for p in range(partitions) if p % len(ids) == i} for i, m in enumerate(ids)}


def assert_exact_cover(assignments: Mapping[str, Iterable[int]]) -> None:
    sets = {name: sorted(parts) for name, parts in assignments.items()}
    seen = sorted(p for parts in sets.values() for p in parts)
    assert seen == sorted(ALL), f"not disjoint and complete: {sets}"


# -- the coordinator's view ----------------------------------------------------------------------


@dataclass(frozen=True)
class GroupView:
    state: str
    protocol: str
    members: dict[str, frozenset[int]]  # member id -> partitions of TOPIC
    client_ids: dict[str, str]
    group_type: str = ""  # CONSUMER (KIP-848, ConsumerGroupDescribe) or CLASSIC


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "matrix-admin"})


def describe_group(bootstrap: str, group: str, admin: Any = None) -> GroupView | None:
    """DescribeGroups through confluent-kafka's admin client (its own decoding of assignments);
    for a KIP-848 consumer group it asks ConsumerGroupDescribe, and `protocol` is then the
    coordinator's assignor."""
    admin = admin or admin_client(bootstrap)
    future = admin.describe_consumer_groups([group], request_timeout=10)[group]
    try:
        desc = future.result(timeout=15)
    except Exception:
        return None
    members = {
        m.member_id: frozenset(
            tp.partition for tp in (m.assignment.topic_partitions or []) if tp.topic == TOPIC
        )
        for m in desc.members
    }
    clients = {m.member_id: m.client_id for m in desc.members}
    state = getattr(desc.state, "name", str(desc.state))
    kind = getattr(desc.type, "name", str(desc.type))
    return GroupView(state, desc.partition_assignor, members, clients, kind)


def committed_offsets(bootstrap: str, group: str) -> dict[int, int | None]:
    """The group's committed offsets of TOPIC, read by a confluent-kafka consumer that does not
    join the group (OffsetFetch only); None where nothing is committed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "matrix-reader"}
    )
    try:
        tps = consumer.committed([TopicPartition(TOPIC, p) for p in sorted(ALL)], timeout=15)
    finally:
        consumer.close()
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in tps}


def commit_as_admin(bootstrap: str, group: str, offsets: Mapping[int, int]) -> None:
    """Commit offsets for an Empty group without joining it (generation -1, as admin tools do)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "matrix-admin-commit",
            "enable.auto.commit": False,
        }
    )
    try:
        tps = [TopicPartition(TOPIC, p, o) for p, o in offsets.items()]
        result = consumer.commit(offsets=tps, asynchronous=False) or []
        errors = [(tp.partition, tp.error) for tp in result if tp.error is not None]
        assert not errors, f"admin commit failed: {errors}"
    finally:
        consumer.close()


_GENERATION = re.compile(
    r"group (\S+): generation (\d+) with (\d+) members, protocol (\S+), leader (\S+)"
)


def generations(log: str, group: str) -> list[tuple[int, int, str, str]]:
    """(generation, members, protocol, leader) of each generation the coordinator formed."""
    return [(int(m[2]), int(m[3]), m[4], m[5]) for m in _GENERATION.finditer(log) if m[1] == group]


def last_generation(
    server: Any, group: str, members: int, protocol: str, timeout: float = 10
) -> tuple[int, int, str, str]:
    """The group's latest generation in the coordinator's log, once it has `members` members
    and `protocol` (the log is read by a thread: a line may arrive just after the reply)."""

    def latest() -> tuple[int, int, str, str] | None:
        gens = generations(server.log, group)
        return gens[-1] if gens and gens[-1][1:3] == (members, protocol) else None

    return wait_until(
        latest,
        timeout,
        interval=0.05,
        describe=lambda: "\n".join(server.log.splitlines()[-15:]),
        what=f"a generation of {group} with {members} members and protocol {protocol}",
    )


# -- waiting for a settled group -----------------------------------------------------------------


def describe_members(members: Iterable[Member], server: Any = None) -> str:
    parts = [m.describe() for m in members]
    if server is not None:
        parts.append("--- server log tail:\n" + "\n".join(server.log.splitlines()[-25:]))
    return "\n".join(parts)


def wait_settled(
    server: Any, group: str, members: Sequence[Member], timeout: float = 45
) -> GroupView:
    """Wait until the group is Stable with exactly `members`, and what every member says it owns
    is what the coordinator handed it. Returns the coordinator's view."""
    last: list[GroupView | None] = [None]
    admin = admin_client(server.bootstrap)

    def settled() -> GroupView | None:
        if any(not m.alive for m in members):
            raise AssertionError("a member exited:\n" + describe_members(members, server))
        ids = {m.member_id for m in members}
        if None in ids or len(ids) != len(members):
            return None
        view = describe_group(server.bootstrap, group, admin)
        last[0] = view
        if view is None or view.state.upper() != "STABLE" or set(view.members) != ids:
            return None
        if any(view.members[m.member_id] != m.assignment for m in members):  # type: ignore[index]
            return None
        return view

    return wait_until(
        settled,
        timeout,
        interval=0.2,
        describe=lambda: f"last DescribeGroups: {last[0]}\n" + describe_members(members, server),
        what=f"group {group} to settle with {len(members)} members",
    )


def owned(members: Iterable[Member]) -> dict[str, set[int]]:
    return {m.member_id or m.name: set(m.assignment) for m in members}
