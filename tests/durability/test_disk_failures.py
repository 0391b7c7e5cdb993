"""A data directory that fails under a serving process halts it, as Kafka halts on its only
log directory failing: acknowledging from memory what the disk does not hold would lose it.

The disk fills through the process's own file-size limit (RLIMIT_FSIZE: writes past it fail
with EFBIG, and Python ignores the SIGXFSZ that comes with them), so no mount is needed. The
data directory goes away by rmtree. Each server is a child process: a halt is `os._exit(70)`.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from minicoord.server.process import READY_PREFIX

pytestmark = pytest.mark.timeout(120)

HALTED = 70
LAUNCH = """
import resource, sys
limit = int(sys.argv[1])
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.argv = ["minicoord"] + sys.argv[2:]
from minicoord.server.cli import run
sys.exit(run())
"""


class Child:
    """`minicoord serve` in a child process, its file size limited to `limit` bytes (0: none)."""

    def __init__(self, limit: int, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, str(limit), "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._drain, daemon=True).start()
        ready: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: ready.put(self.proc.stdout.readline()), daemon=True).start()
        line = ready.get(timeout=20)
        assert line.startswith(READY_PREFIX), line + self.log
        self.bootstrap = line[len(READY_PREFIX) :].split(" ")[0]

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def exit_code(self, within_s: float) -> int | None:
        try:
            return self.proc.wait(within_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _read_back(bootstrap: str, topic: str) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[int] = []
        deadline = time.monotonic() + 30
        while len(values) < high - low and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(int(message.value()[:8]))
        return values
    finally:
        consumer.close()


def test_a_full_disk_under_flush_policy_none_halts_the_server(tmp_path: Path) -> None:
    # Under `none` a writer task puts the buffered records on disk each second; the disk
    # filling must stop the server, not the writer alone (which left the server acknowledging
    # from memory what no later write, nor the clean shutdown, ever saved).
    data = tmp_path / "data"
    args = ("--data-dir", str(data), "--config", "log.flush.policy=none", "--topic", "t:1")
    server = Child(256 * 1024, *args)
    acked: list[int] = []
    producer = Producer(
        {"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 5,
         "message.timeout.ms": 5000, "retries": 0}
    )  # fmt: skip

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.append(int(message.value()[:8]))  # type: ignore[attr-defined]

    try:
        sent = 0
        deadline = time.monotonic() + 30
        while server.proc.poll() is None and sent < 3000 and time.monotonic() < deadline:
            producer.produce("t", value=b"%08d" % sent + b"x" * 1000, on_delivery=delivered)
            sent += 1
            producer.poll(0.001)
        producer.flush(10)
        code = server.exit_code(within_s=10)
        assert code == HALTED, f"exit {code} after {sent} records sent\n{server.log}"
        assert "cannot write a log" in server.log and "halting" in server.log, server.log
    finally:
        server.stop()
    assert acked, "nothing was acknowledged before the disk filled"

    again = Child(0, *args)
    try:
        values = _read_back(again.bootstrap, "t")
    finally:
        again.stop()
    # What reached the disk is the records in order, none missing before the last, none twice
    # (`none` may lose the last second of acknowledged records; it must not lose more).
    assert values == list(range(len(values))), values[:20]
    assert len(values) >= acked[0] + 1


@pytest.mark.parametrize("how", ["removed", "renamed"])
def test_a_data_directory_gone_under_the_server_halts_it(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    server = Child(0, "--data-dir", str(data), "--topic", "kept:1")
    try:
        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
        producer.produce("kept", value=b"00000000")
        assert producer.flush(10) == 0
        if how == "removed":
            shutil.rmtree(data)
        else:
            data.rename(tmp_path / "moved")
        # A new topic's log has nowhere to go: the server halts rather than make the data
        # directory again, empty, and acknowledge into it.
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        futures = admin.create_topics([NewTopic("fresh", 1)], request_timeout=5)
        with pytest.raises(Exception):  # noqa: B017 - the client's error for a closed connection
            futures["fresh"].result(10)
        code = server.exit_code(within_s=10)
        assert code == HALTED, f"exit {code}\n{server.log}"
        assert "cannot use the data directory handling CreateTopics" in server.log, server.log
        assert not data.exists(), "the data directory was made again"
    finally:
        server.stop()
