"""The cluster id belongs to the data directory (its meta.properties, as Kafka keeps it): the
same across restarts, even after SIGKILL, so clients do not take the restarted broker for
another cluster; a directory written by another broker.id is refused, as Kafka refuses it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from confluent_kafka.admin import AdminClient


def cluster_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_cluster(request_timeout=10).result(15).cluster_id)


def test_the_cluster_id_survives_restarts_and_is_the_data_dirs(node_factory: Any) -> None:
    node = node_factory()
    node.start()
    first = cluster_id(node.bootstrap)
    assert f"cluster.id={first}" in (node.data_dir / "meta.properties").read_text()
    node.stop()
    node.start()
    assert cluster_id(node.bootstrap) == first
    node.kill()
    node.start()
    assert cluster_id(node.bootstrap) == first
    node.stop()
    # Another data directory is another cluster.
    other = node_factory()
    other.start()
    assert cluster_id(other.bootstrap) != first
    other.stop()
    # Another broker.id on this directory is refused at start, naming both.
    serve = [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0"]
    result = subprocess.run(
        [*serve, "--data-dir", str(node.data_dir), "--config", "broker.id=7"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "belongs to node 0 (its meta.properties), not to broker.id=7" in result.stderr


def test_a_damaged_meta_properties_is_refused_not_replaced(node_factory: Any) -> None:
    node = node_factory()
    node.start()
    node.stop()
    meta = node.data_dir / "meta.properties"
    serve = [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0"]
    for text, why in [
        ("", "version None is not 0 or 1"),
        ("garbage\n", "version None is not 0 or 1"),
        ("version=7\ncluster.id=abc\nnode.id=0\n", "version '7' is not 0 or 1"),
        ("version=1\nnode.id=0\n", "has no cluster.id"),
    ]:
        meta.write_text(text)
        result = subprocess.run(
            [*serve, "--data-dir", str(node.data_dir)], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 2 and why in result.stderr, (text, result.stderr)
        assert meta.read_text() == text  # left as it was
