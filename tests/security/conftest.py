"""Fixtures of the security tests.

`secure`: a server shared by a module with PLAINTEXT, SASL_SSL, SASL_PLAINTEXT and SSL
listeners (client certificates required on SSL), users alice and bob, OAUTHBEARER enabled.

`identity` (the ACL wire tests): the principal the server will see and the settings each stock
client needs to connect as it; every ACL test runs once per identity in aclkit.IDENTITIES.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aclkit import IDENTITIES, Identity
from minicoord.server.security.certs import CertFiles, write_certs
from minicoord.testing.embedded import EmbeddedServer, running
from prereqkit import NODE_DIR, node_modules_ready
from seckit import LISTENERS, SECURE_CONFIGS, USERS


@pytest.fixture(params=IDENTITIES, ids=[i.name for i in IDENTITIES])
def identity(request: pytest.FixtureRequest) -> Iterator[Identity]:
    yield request.param


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return write_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure(certs: CertFiles) -> Iterator[EmbeddedServer]:
    with running(
        SECURE_CONFIGS, [("sec-topic", 1)], listeners=LISTENERS, users=USERS, tls=certs
    ) as server:
        yield server


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """kafkajs installed in tests/matrix/node (npm ci from its lock file)."""
    npm = shutil.which("npm")
    assert npm is not None and shutil.which("node") is not None, "needs node and npm"
    if not node_modules_ready():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=300
        )
    return NODE_DIR


@pytest.fixture(scope="session")
def kcat() -> str:
    found = shutil.which("kcat")
    if found is None:
        subprocess.run(["apt-get", "install", "-y", "kcat"], check=True, timeout=300)
        found = shutil.which("kcat")
    assert found is not None
    return found
