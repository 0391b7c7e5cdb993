"""Fixtures of the fuzzing tests (helpers live in fuzzkit.py: conftest modules share a name)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from minicoord.server.broker import Broker
from minicoord.server.config import Config


@pytest.fixture
def broker() -> Iterator[Broker]:
    """A broker on a loop of its own that the tests turn by hand (see `settle`)."""
    loop = asyncio.new_event_loop()
    b = Broker(Config(socket_request_max_bytes=1024 * 1024))
    b.create_topic("topic6", 6)
    b.attach(loop)
    b.loop_for_tests = loop  # type: ignore[attr-defined]
    yield b
    b.close()
    loop.close()
