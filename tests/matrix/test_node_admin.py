"""The Node.js clients' own admin APIs where they reach APIs no other client here uses:
kafkajs' `alterConfigs` has only AlterConfigs (API 33), not IncrementalAlterConfigs."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from matrixkit import NODE_DIR

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("node_clients")]

RUN_TIMEOUT_S = 60
DEFAULTS = {"retention.ms": "604800000", "cleanup.policy": "delete"}


@pytest.mark.parametrize("client", ["kafkajs", "platformatic"])
def test_alter_configs_replaces_a_topics_overrides(server: Any, group_id: str, client: str) -> None:
    topic = "ac-" + "".join(c if c.isalnum() else "-" for c in group_id)[-60:]
    args = ["node", str(NODE_DIR / "alter_configs.mjs"), client, server.bootstrap, topic]
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=NODE_DIR)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, f"{events}\n{done.stderr}"
    values = {e["when"]: e["values"] for e in events if e["event"] == "configs"}
    created = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    assert values["created"] == {**created, "segment.bytes": "1073741824"}
    # validateOnly changes nothing.
    assert values["validated"] == values["created"]
    # Only the config named is left overridden; the others are back to their defaults.
    assert values["altered"] == {**DEFAULTS, "segment.bytes": "1048576"}
