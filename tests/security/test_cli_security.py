"""`minicoord certs` and `minicoord serve` with listeners, --user and JAAS users: the ready line
names every listener, clients authenticate, and the JSON log holds no password. The pytest
plugin's marker takes the same security settings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from minicoord.server.process import start_server_process
from minicoord.testing.embedded import EmbeddedServer

pytestmark = pytest.mark.clients

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw-Jq" user_frank="frank-pw-Zr";'
)


def _metadata_ok(conf: dict[str, object]) -> bool:
    from confluent_kafka import KafkaException, Producer

    errors: list[object] = []
    producer = Producer(conf | {"error_cb": errors.append})
    try:
        producer.list_topics(timeout=5)
    except KafkaException:
        return False
    return not errors


def test_certs_then_serve_with_three_listeners(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "minicoord.server.cli", "certs", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "ca.pem" in out.stdout
    server = start_server_process(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": tmp_path / "server.pem",
            "ssl.truststore.location": tmp_path / "ca.pem",
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        },
        extra_args=["--user", "grace:grace-pw-Uv", "--log-format", "json", "--log-level", "DEBUG"],
    )
    try:
        found = dict(
            (name, port) for port, name in re.findall(r":(\d+) \((\w+)\)", server.listeners)
        )
        assert set(found) == {"PLAINTEXT", "SASL_SSL", "SSL"}, server.listeners
        base = {"ssl.ca.location": str(tmp_path / "ca.pem")}
        sasl = base | {
            "bootstrap.servers": f"127.0.0.1:{found['SASL_SSL']}",
            "security.protocol": "SASL_SSL",
        }
        grace = {"sasl.username": "grace", "sasl.password": "grace-pw-Uv"}
        assert _metadata_ok(sasl | grace | {"sasl.mechanism": "SCRAM-SHA-512"})
        assert _metadata_ok(sasl | grace | {"sasl.mechanism": "PLAIN"})
        frank = {"sasl.username": "frank", "sasl.password": "frank-pw-Zr"}
        assert _metadata_ok(sasl | frank | {"sasl.mechanism": "PLAIN"})
        assert not _metadata_ok(sasl | frank | {"sasl.mechanism": "SCRAM-SHA-256"})
        assert _metadata_ok(
            base
            | {
                "bootstrap.servers": f"127.0.0.1:{found['SSL']}",
                "security.protocol": "SSL",
                "ssl.certificate.location": str(tmp_path / "client.crt"),
                "ssl.key.location": str(tmp_path / "client.key"),
            }
        )
    finally:
        server.stop()
    lines = [json.loads(line) for line in server.stderr_lines if line.startswith("{")]
    assert lines
    text = "".join(server.stderr_lines)
    for secret in ("grace-pw-Uv", "frank-pw-Zr", "admin-pw-Jq"):
        assert secret not in text


@pytest.mark.minicoord(listeners="SASL_PLAINTEXT://127.0.0.1:0", users={"heidi": "heidi-pw"})
def test_the_plugin_fixture_hands_out_client_settings(minicoord: EmbeddedServer) -> None:
    settings = minicoord.client(mechanism="SCRAM-SHA-256")
    assert (settings.security_protocol, settings.username) == ("SASL_PLAINTEXT", "heidi")
    assert "heidi-pw" not in repr(settings)
    assert _metadata_ok(settings.confluent())
