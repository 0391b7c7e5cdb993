"""Fixtures of the ACL wire tests: who the client is, and a server whose ACLs name it.

`identity` yields the principal the server will see and the settings each stock client needs
to connect as it. Today every connection is User:ANONYMOUS (plaintext); when SASL lands, add
identities (e.g. SASL_PLAINTEXT as User:alice) to aclkit.IDENTITIES and every test runs for each.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aclkit import IDENTITIES, Identity


@pytest.fixture(params=IDENTITIES, ids=[i.name for i in IDENTITIES])
def identity(request: pytest.FixtureRequest) -> Iterator[Identity]:
    yield request.param
