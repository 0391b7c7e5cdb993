"""librdkafka consumers fetch (long-polls) instead of refusing Fetch and spinning.

librdkafka enables its v2 message format only if the broker offers Produce v3+ and Fetch
v4+; without it, it refuses every Fetch locally in a tight retry loop. Counted through the
server's own metrics.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer
from minicoord.testing import running

pytestmark = pytest.mark.clients


def requests_of(port: int, api: str) -> int:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = re.findall(rf'minicoord_requests_total\{{api="{api}",version="\d+"\}} ([0-9.]+)', body)
    return int(sum(float(x) for x in found))


def test_an_assigned_confluent_consumer_long_polls(group_id: str) -> None:
    with running(topics=[("t", 2)], metrics_port=0) as server:
        assigned: list[object] = []
        consumer = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 200,
            }
        )
        consumer.subscribe(["t"], on_assign=lambda c, ps: assigned.extend(ps))
        try:
            deadline = time.monotonic() + 20
            while not assigned and time.monotonic() < deadline:
                consumer.poll(0.1)
            assert len(assigned) == 2
            port = server.server.metrics_port
            before = requests_of(port, "Fetch")
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                assert consumer.poll(0.1) is None  # no records: there is no data path
            fetched = requests_of(port, "Fetch") - before
        finally:
            consumer.close()
    # Long polls of 200 ms over 3 s: a handful per second, not none (refused) or thousands.
    assert 3 <= fetched <= 200, fetched
