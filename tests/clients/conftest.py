"""Fixtures for the stock-client tests: the server under test and members in child processes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from clientkit import ChildMember

if TYPE_CHECKING:
    from minicoord.server.process import ServerProcess

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


@pytest.fixture
def server(request: pytest.FixtureRequest, kafka_server: ServerProcess) -> Iterator[ServerProcess]:
    """The 6-partition server; its coordinator log is printed when the test fails.

    Afterwards the log must hold no warning or error: a connection the server closed on a
    stock client (an undecodable request, an API it does not serve, an internal error) is a
    failure even when the client recovered from it.
    """
    yield kafka_server
    log = kafka_server.log
    failed = any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )
    if failed:
        print("---- minicoord log (tail) ----\n" + "\n".join(log.splitlines()[-80:]))
        return
    bad = [line for line in log.splitlines() if _BAD_LINE.search(line)]
    assert not bad, "server logged problems:\n" + "\n".join(bad[:20])


@pytest.fixture
def child_member() -> Iterator[Callable[..., ChildMember]]:
    """Start members in child processes; any still running are killed afterwards."""
    started: list[ChildMember] = []

    def start(client: str, bootstrap: str, group: str, **options: Any) -> ChildMember:
        child = ChildMember(client, bootstrap, group, **options)
        started.append(child)
        return child

    yield start
    for child in started:
        child.kill()
