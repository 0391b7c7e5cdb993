"""The Node.js clients' own admin APIs where they reach APIs no other client here uses:
kafkajs' `alterConfigs` has only AlterConfigs (API 33), not IncrementalAlterConfigs;
@platformatic/kafka's `describeLogDirs` is DescribeLogDirs (API 35), and its
`alterClientQuotas` and `describeClientQuotas` are AlterClientQuotas and DescribeClientQuotas
(APIs 49 and 48); its `unregisterBrokerV0` is UnregisterBroker (API 64)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from matrixkit import NODE_DIR, TOPIC

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


def test_platformatic_describes_the_in_memory_log_dir(server: Any) -> None:
    args = ["node", str(NODE_DIR / "log_dirs.mjs"), server.bootstrap, TOPIC, "[0, 1, 99]"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=NODE_DIR)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    (broker,) = json.loads(done.stdout)
    (result,) = broker["results"]
    # An in-memory server's volume sizes are unknown (-1, as Kafka answers for a volume it
    # cannot read); partition 99 does not exist and is left out.
    assert (result["logDir"], result["totalBytes"], result["usableBytes"]) == (
        "(in memory)",
        "-1",
        "-1",
    )
    (topic,) = result["topics"]
    assert topic["name"] == TOPIC
    assert [(p["partitionIndex"], p["offsetLag"]) for p in topic["partitions"]] == [
        (0, "0"),
        (1, "0"),
    ]


def test_platformatic_sets_describes_and_removes_client_quotas(server: Any, group_id: str) -> None:
    user = "u-" + "".join(c if c.isalnum() else "-" for c in group_id)[-40:]
    args = ["node", str(NODE_DIR / "client_quotas.mjs"), server.bootstrap, user]
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=NODE_DIR)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    steps = {s["step"]: s for s in map(json.loads, done.stdout.splitlines())}

    def described(step: str) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        assert "error" not in steps[step], steps[step]
        return {
            tuple(sorted((e["entityType"], e["entityName"]) for e in entry["entity"])): {
                v["key"]: v["value"] for v in entry["values"]
            }
            for entry in steps[step]["entries"]
        }

    assert [e["errorCode"] for e in steps["set"]["entries"]] == [0, 0, 0]
    alice, both = (("user", user),), (("client-id", "app"), ("user", user))
    default = (("user", None),)
    # An exact user matches every entity naming that user, unless strict.
    assert described("exact") == {
        alice: {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152},
        both: {"producer_byte_rate": 4096},
    }
    assert described("exact strict") == {
        alice: {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}
    }
    assert described("default")[default] == {"request_percentage": 50.5}
    # validateOnly stored nothing; the removed key is gone; any user (the default too).
    assert [e["errorCode"] for e in steps["validate only"]["entries"]] == [0]
    specified = described("specified")
    assert specified[alice] == {"producer_byte_rate": 1048576}
    assert specified[default] == {"request_percentage": 50.5}
    assert not any(dict(entity).get("user") == "other" for entity in specified)
    # An IP takes only connection_creation_rate; an IP filter cannot name users (INVALID_REQUEST).
    assert steps["bad key"]["error"] == [42, "Invalid configuration key producer_byte_rate"]
    assert [e["errorCode"] for e in steps["ip"]["entries"]] == [0]
    assert steps["bad filter"]["error"][0] == 42


def test_platformatic_unregisters_only_this_node(server: Any) -> None:
    # This node's id (0) is NONE and changes nothing; another id was never registered.
    args = ["node", str(NODE_DIR / "unregister_broker.mjs"), server.bootstrap, "7", "0", "-1"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=NODE_DIR)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    answers = json.loads(done.stdout)
    not_registered = (102, None)  # BROKER_ID_NOT_REGISTERED, with no message, as Kafka
    assert [(a["errorCode"], a["errorMessage"]) for a in answers] == [
        not_registered,
        (0, None),
        not_registered,
    ]
    # Still served: an admin client finds the node (Metadata) and its log directory.
    args = ["node", str(NODE_DIR / "log_dirs.mjs"), server.bootstrap, TOPIC, "[0]"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=NODE_DIR)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
