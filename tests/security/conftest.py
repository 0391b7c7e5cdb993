"""Fixtures of the ACL wire tests: who the client is, and a server whose ACLs name it.

`identity` yields the principal the server will see and the settings each stock client needs
to connect as it. Today every connection is User:ANONYMOUS (plaintext); when SASL lands, add
identities (e.g. SASL_PLAINTEXT as User:alice) to IDENTITIES and every test runs for each.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass(frozen=True)
class Identity:
    name: str
    principal: str
    # Extra client settings: librdkafka's names for confluent-kafka, kafka-python's kwargs.
    confluent: dict[str, Any] = field(default_factory=dict)
    kafka_python: dict[str, Any] = field(default_factory=dict)
    # Server arguments this identity needs (listeners, users) besides the ACLs.
    server: dict[str, Any] = field(default_factory=dict)


IDENTITIES = [Identity("anonymous", "User:ANONYMOUS")]


@pytest.fixture(params=IDENTITIES, ids=[i.name for i in IDENTITIES])
def identity(request: pytest.FixtureRequest) -> Iterator[Identity]:
    yield request.param
