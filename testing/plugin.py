"""The pytest plugin: installing minicoord registers it (entry point `pytest11`).

Fixtures:
- `minicoord`: a fresh server for one test;
- `minicoord_session`: one server shared by the whole session.
Both yield an EmbeddedServer (`.bootstrap`, `.control`, `.client(listener, user, mechanism)`
for a secured listener's client settings). Configure them with Kafka config
names: per test with `@pytest.mark.minicoord(configs={...}, topics=[("orders", 6)])` (and
`acls=["deny User:* Read group:blocked"]`, `super_users=["User:admin"]`, `listeners=`,
`users=`, `tls=`, `ssl_client_auth=`), for the
session with the ini option `minicoord_configs` (lines of key=value) and `minicoord_topics`
(lines of NAME:PARTITIONS).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from minicoord.server.config import ConfigError, parse_setting
from minicoord.server.topics import parse_topic_spec
from minicoord.testing.embedded import EmbeddedServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "minicoord_configs", "Kafka configs (key=value lines) of minicoord_session", "linelist"
    )
    parser.addini(
        "minicoord_topics", "topics (NAME:PARTITIONS lines) of minicoord_session", "linelist"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "minicoord(configs=None, topics=(), acls=(), super_users=(), listeners=None, "
        "users=None, tls=None, ssl_client_auth=None): settings of the test's minicoord server",
    )
    # kafka-python, whose protocol classes the server loads as it serves, reads its bundled
    # schemas with the legacy importlib.resources.read_text: two warnings per schema (the
    # second from the open_text that read_text itself calls), hundreds in the summary of a
    # suite that only uses the fixtures. Only those are silenced, not the user's own calls.
    config.addinivalue_line(
        "filterwarnings", "ignore:read_text is deprecated:DeprecationWarning:kafka"
    )
    config.addinivalue_line(
        "filterwarnings",
        "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
    )


MARKER_SETTINGS = frozenset(
    {"configs", "topics", "acls", "super_users", "listeners", "users", "tls", "ssl_client_auth"}
)


def _configs(lines: list[str]) -> dict[str, str]:
    # The ini's lines, read as --config reads its values (spaces around `=` allowed).
    try:
        return dict(parse_setting(line.strip()) for line in lines if line.strip())
    except ConfigError as exc:
        raise pytest.UsageError(f"minicoord_configs: {exc}") from None


def _topics(lines: list[str]) -> list[tuple[str, int]]:
    try:
        return [parse_topic_spec(line.strip()) for line in lines if line.strip()]
    except ValueError as exc:
        raise pytest.UsageError(f"minicoord_topics: {exc}") from None


@pytest.fixture
def minicoord(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    marker = request.node.get_closest_marker("minicoord")
    kwargs = dict(marker.kwargs) if marker else {}
    unknown = sorted(set(kwargs) - MARKER_SETTINGS)
    if unknown or (marker and marker.args):
        # A typo (topic= for topics=) would otherwise run the test on a server without it.
        raise pytest.UsageError(
            f"@pytest.mark.minicoord takes keywords {', '.join(sorted(MARKER_SETTINGS))}; "
            f"not {', '.join(unknown) or 'positional arguments'}"
        )
    security = {
        k: kwargs[k]
        for k in ("acls", "super_users", "listeners", "users", "tls", "ssl_client_auth")
        if k in kwargs
    }
    configs, topics = kwargs.get("configs"), kwargs.get("topics", ())
    with _server_for("@pytest.mark.minicoord", configs, topics, **security) as server:
        yield server


@pytest.fixture(scope="session")
def minicoord_session(pytestconfig: pytest.Config) -> Iterator[EmbeddedServer]:
    configs = _configs(pytestconfig.getini("minicoord_configs"))
    topics = _topics(pytestconfig.getini("minicoord_topics"))
    with _server_for("minicoord_configs/minicoord_topics", configs, topics) as server:
        yield server


def _server_for(where: str, configs: Any, topics: Any, **security: Any) -> EmbeddedServer:
    """The server these settings describe, not yet started; settings it refuses (an unknown
    config, a bad value or topic) are a usage error that says where they came from, as a
    malformed line is, not a traceback from inside the fixture."""
    try:
        return EmbeddedServer(configs, topics, **security)
    except ValueError as exc:  # ConfigError and InvalidAcl are ValueErrors
        raise pytest.UsageError(f"{where}: {exc}") from None
