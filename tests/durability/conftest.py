"""Fixtures for the durability tests: one data directory and port served by successive
`minicoord serve` processes (see durakit.Node).

Every wait is bounded by a deadline and an iteration count; every process a test starts is
killed at teardown, and the logs of all of them are printed when the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from durakit import Node


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def node_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    nodes: list[Node] = []

    def make(
        configs: dict[str, object] | None = None,
        topics: list[tuple[str, int]] | None = None,
        data_dir: Path | None = None,
    ) -> Node:
        node = Node(data_dir or tmp_path / f"data{len(nodes)}", configs, topics)
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        for server in node.processes:
            server.kill()
    failed = any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )
    if failed:
        for node in nodes:
            tail = "\n".join(node.all_logs().splitlines()[-150:])
            print(f"==== server logs of {node.data_dir} ====\n{tail}")
