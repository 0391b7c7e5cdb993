"""kafkajs and kcat (librdkafka's CLI) join a group and commit over SASL_SSL with PLAIN and
SCRAM-SHA-512, and over SSL with a client certificate."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from minicoord.testing.embedded import EmbeddedServer
from seckit import WAY_IDS, WAYS, committed, fresh, seed, settings

pytestmark = pytest.mark.clients
HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("way", WAYS, ids=WAY_IDS)
def test_kafkajs_joins_and_commits(secure: EmbeddedServer, node_clients: Path, way: Any) -> None:
    topic, group = fresh("js"), fresh("js-group")
    seed(secure, topic)
    client = settings(secure, way)
    options = {
        "bootstrap": client.bootstrap,
        "topic": topic,
        "group": group,
        "ssl": {"ca": client.ca_file, "cert": client.cert_file, "key": client.key_file},
        "sasl": None
        if client.sasl_mechanism is None
        else {
            "mechanism": client.sasl_mechanism.lower(),
            "username": client.username,
            "password": client.password,
        },
    }
    done = subprocess.run(
        ["node", str(HERE / "kafkajs_member.mjs"), str(node_clients), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    result = json.loads(lines[-1])
    assert result == {"ok": True, "values": ["record-0", "record-1", "record-2"]}, done.stderr[
        -3000:
    ]
    assert committed(secure, group, topic) == 3


@pytest.mark.parametrize("way", WAYS, ids=WAY_IDS)
def test_kcat_joins_and_commits(secure: EmbeddedServer, kcat: str, way: Any) -> None:
    topic, group = fresh("kcat"), fresh("kcat-group")
    seed(secure, topic)
    conf = settings(secure, way).confluent()
    args = [kcat, "-b", conf.pop("bootstrap.servers"), "-G", group, "-c", "3", "-q"]
    # kcat takes librdkafka's properties (sasl.mechanisms is the plural name it knows).
    conf["auto.offset.reset"] = "earliest"
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    args.append(topic)
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["record-0", "record-1", "record-2"], done.stderr[-3000:]
    # kcat commits what it printed when it closes its consumer.
    assert committed(secure, group, topic) == 3
