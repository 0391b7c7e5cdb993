"""Shared fixtures: minicoord servers, as real processes or in this test's event loop."""

from __future__ import annotations

import itertools
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

import prereqkit
import pytest
from minicoord.clients.connection import ProtocolClient
from minicoord.server.app import Server
from minicoord.server.config import Config
from minicoord.server.process import ServerProcess, start_server_process


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before any test runs: the programs the selected tests need (prereqkit) are here, or
    the run stops with one message saying what is missing and how to install it."""
    if config.option.collectonly:
        return
    needs: Counter[str] = Counter()
    for item in items:
        needs.update(prereqkit.needs_of(item.path, getattr(item, "fixturenames", ())))
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(text: str) -> None:
        if reporter is not None:
            reporter.write_line(f"minicoord tests: {text}")

    missing = prereqkit.check(needs, os.environ, say)
    if missing:
        raise pytest.UsageError(prereqkit.message(missing, needs))


# Configs that let client tests see evictions and rebalances in seconds rather than minutes.
FAST_GROUPS = {
    "group.min.session.timeout.ms": 1000,
}


@pytest.fixture
def server_factory() -> Iterator[Callable[..., ServerProcess]]:
    """Start `minicoord serve` processes on ephemeral ports; all are stopped afterwards."""
    started: list[ServerProcess] = []

    def factory(
        configs: dict[str, object] | None = None, topics: list[tuple[str, int]] | None = None
    ) -> ServerProcess:
        server = start_server_process({**FAST_GROUPS, **(configs or {})}, topics or [])
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def kafka_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """A server process with a 6-partition topic named 'topic6'."""
    return server_factory(topics=[("topic6", 6)])


@pytest.fixture
async def inproc_server() -> AsyncIterator[Server]:
    """A server in this test's event loop, for protocol tests with the raw client."""
    config = Config.from_pairs({k: str(v) for k, v in FAST_GROUPS.items()})
    async with Server(config, "127.0.0.1", 0, topics=[("topic6", 6)]) as server:
        yield server


@pytest.fixture
async def raw_client(inproc_server: Server) -> AsyncIterator[ProtocolClient]:
    client = await ProtocolClient.connect("127.0.0.1", inproc_server.port, "raw-test")
    yield client
    await client.close()


_ids = itertools.count()


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    """A group id unique to the test (and to this run, across parallel workers)."""
    return f"{request.node.name[:40]}-{os.getpid()}-{next(_ids)}-{uuid.uuid4().hex[:6]}"
