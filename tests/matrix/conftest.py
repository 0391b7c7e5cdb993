"""The client matrix: its clients are installed here, not assumed.

Before any test runs, tests/conftest.py has checked that node, npm and kcat are here for the
tests that need them (installing the Node.js clients with `npm ci`, and kcat with apt-get where
it can; tests/prereqkit.py), so that a machine without them stops with one message. The
fixtures below check again for a test run on its own: `node_clients` runs `npm ci` in
tests/matrix/node when node_modules does not hold exactly the versions package.json pins;
`kcat` runs `apt-get install -y kcat` when kcat is not on PATH. An install that fails fails the
tests that need it, with the installer's output: nothing here is ever skipped.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from matrixkit import (
    NODE_DIR,
    PARTITIONS,
    TOPIC,
    KcatMember,
    Member,
    NodeMember,
    PyMember,
    describe_members,
)
from prereqkit import MIN_NODE, node_modules_ready

INSTALL_TIMEOUT_S = 600
# The request log's refusals of an API or version we do not serve are INFO lines, but a stock
# client meeting one is as much a failure as a closed connection.
_BAD_LINE = re.compile(
    r" (WARNING|ERROR|CRITICAL) |Traceback"
    r"| minicoord\.requests: refused .*: (UNSUPPORTED_VERSION|API key \d+ is not one minicoord)"
)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    return any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    """Run an installer step; fail (never skip) with its output when it does not succeed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{what}: {' '.join(cmd)} could not run: {exc!r}", pytrace=False)
    output = f"$ {' '.join(cmd)}\n{done.stdout}\n{done.stderr}"
    if done.returncode != 0:
        pytest.fail(f"{what} failed (exit {done.returncode}):\n{output}", pytrace=False)
    return output


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """kafkajs and @platformatic/kafka installed in tests/matrix/node (npm ci from the lock)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            f"the client matrix needs Node.js >= 20.19.4 and npm on PATH (node={node}, npm={npm})",
            pytrace=False,
        )
    raw = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    version = tuple(int(x) for x in re.findall(r"\d+", raw.stdout)[:3])
    if version < MIN_NODE:
        pytest.fail(f"node {raw.stdout.strip()} is older than 20.19.4", pytrace=False)
    # One installer at a time (parallel workers share the folder).
    with open(NODE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not node_modules_ready():
            _run([npm, "ci", "--no-audit", "--no-fund"], "npm ci (tests/matrix/node)", NODE_DIR)
            if not node_modules_ready():
                pytest.fail("npm ci finished but node_modules does not match package.json")
    return NODE_DIR


@pytest.fixture(scope="session")
def kcat() -> str:
    """The kcat binary, installed with apt-get when it is not on PATH."""
    found = shutil.which("kcat")
    if found:
        return found
    prefix: list[str] = []
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        if sudo is None:
            pytest.fail("kcat is not installed, and installing it needs root (no sudo)")
        prefix = [sudo, "-n"]
    _run([*prefix, "apt-get", "update"], "apt-get update")
    _run([*prefix, "apt-get", "install", "-y", "--no-install-recommends", "kcat"], "install kcat")
    found = shutil.which("kcat")
    if found is None:
        pytest.fail("apt-get installed kcat but it is not on PATH", pytrace=False)
    return found


@pytest.fixture
def server(request: pytest.FixtureRequest, server_factory: Callable[..., Any]) -> Iterator[Any]:
    """A server with one 6-partition topic. After a passing test its log must hold no warning or
    error (a connection it closed on a stock client is a failure even if the client recovered);
    after a failing one its log tail is printed."""
    srv = server_factory(topics=[(TOPIC, PARTITIONS)])
    yield srv
    log = srv.log
    if _failed(request):
        print("---- minicoord log (tail) ----\n" + "\n".join(log.splitlines()[-80:]))
        return
    bad = [line for line in log.splitlines() if _BAD_LINE.search(line)]
    assert not bad, "server logged problems:\n" + "\n".join(bad[:20])


class Spawner:
    """Starts members of any client against one server; all are killed at the end."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.started: list[Member] = []

    def node(self, client: str, group: str, **options: Any) -> Member:
        assert (NODE_DIR / "node_modules").is_dir(), "use the node_clients fixture"
        return self._add(NodeMember(client, self.bootstrap, group, **options))

    def py(self, client: str, group: str, **options: Any) -> Member:
        return self._add(PyMember(client, self.bootstrap, group, **options))

    def kcat(self, group: str, **options: Any) -> KcatMember:
        path = shutil.which("kcat")
        assert path is not None, "use the kcat fixture"
        member = KcatMember(path, self.bootstrap, group, **options)
        self._add(member)
        return member

    def _add(self, member: Member) -> Any:
        self.started.append(member)
        return member

    def kill_all(self) -> None:
        for member in self.started:
            member.kill()


@pytest.fixture
def spawn(request: pytest.FixtureRequest, server: Any) -> Iterator[Spawner]:
    spawner = Spawner(server.bootstrap)
    yield spawner
    spawner.kill_all()
    if _failed(request) and spawner.started:
        print("---- members ----\n" + describe_members(spawner.started))
