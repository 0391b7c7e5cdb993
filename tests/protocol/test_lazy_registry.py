"""The handler registry's static table is what the handler modules and kafka-python's classes say.

ApiVersions is answered from `APIS` without importing the handler modules; these tests import
every one of them and hold the table to each module's HANDLER and its spec's classes, so the
table cannot drift from what is served.
"""

from __future__ import annotations

import pkgutil

import minicoord.server.handlers as handlers_package
import pytest
from kafka.protocol.metadata import ApiVersionsResponse
from minicoord.protocol.apis import SOURCES, SPECS, api_name
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers import ADVERTISED_FROM, APIS, HandlerRegistry, load_handler
from minicoord.server.handlers.api_versions import build

NOT_HANDLERS = {"base"}


def test_every_handler_module_is_listed() -> None:
    modules = {m.name for m in pkgutil.iter_modules(handlers_package.__path__)} - NOT_HANDLERS
    assert sorted(module for module, _, _ in APIS.values()) == sorted(modules)


def test_every_served_api_has_classes_named() -> None:
    assert set(SOURCES) == set(APIS)


@pytest.mark.parametrize("key", sorted(APIS))
def test_table_matches_the_handler_and_its_classes(key: int) -> None:
    module, low, high = APIS[key]
    handler = load_handler(key)
    assert handler.spec.key == key
    assert (handler.min_version, handler.max_version) == (low, high), module
    spec = SPECS[key]
    assert handler.spec == spec
    assert spec.name == api_name(key)
    assert (key, key) == (spec.request.API_KEY, spec.response.API_KEY)
    assert spec.request.__name__ == f"{api_name(key)}Request"
    # What we serve lies within what the schemas describe.
    assert spec.min_version <= low <= high <= spec.max_version


def test_api_versions_lists_what_the_loaded_handlers_serve() -> None:
    registry = HandlerRegistry.default()
    loaded = sorted(
        (h.spec.key, h.min_version, h.max_version) for h in (load_handler(k) for k in APIS)
    )
    assert registry.versions() == loaded
    advertised = [(a.api_key, a.min_version, a.max_version) for a in registry.api_versions()]
    listed = [(key, ADVERTISED_FROM.get(key, low), high) for key, low, high in loaded]
    assert advertised == listed
    # Byte for byte, the answer is the one a registry built from every handler would give.
    expected = [ApiVersionsResponse.ApiVersion(*entry) for entry in listed]
    for version in range(5):
        got = build(version, ErrorCode.NONE, registry.api_versions()).encode(version=version)
        assert got == build(version, ErrorCode.NONE, expected).encode(version=version)


def test_a_handler_is_loaded_when_first_asked_for() -> None:
    registry = HandlerRegistry.default()
    assert registry.get(12) is load_handler(12)
    assert registry.get(12) is registry.get(12)
    assert registry.get(9999) is None
    assert [h.spec.key for h in registry] == list(APIS)


def test_a_registry_of_given_handlers_serves_and_advertises_only_those() -> None:
    heartbeat, commit = load_handler(12), load_handler(8)
    registry = HandlerRegistry([commit, heartbeat])
    assert registry.get(12) is heartbeat
    assert registry.get(18) is None  # not given, so not loaded either
    assert registry.versions() == [(8, 2, 10), (12, 0, 4)]
    assert [a.api_key for a in registry.api_versions()] == [8, 12]
    assert list(registry) == [commit, heartbeat]


@pytest.mark.parametrize("key", sorted(SOURCES))
def test_flexible_versions_are_read_as_kafka_python_reads_them(key: int) -> None:
    # ApiSpec keeps the first flexible version instead of asking the classes per request.
    spec = SPECS[key]
    for version in range(0, spec.max_version + 2):
        assert spec.request_flexible(version) == bool(spec.request.flexible_version_q(version))
        assert spec.response_flexible(version) == bool(spec.response.flexible_version_q(version))
