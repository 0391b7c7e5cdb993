"""A data directory that fails under a serving process halts it, as Kafka halts on its only
log directory failing: acknowledging from memory what the disk does not hold would lose it.

The disk fills through the process's own file-size limit (RLIMIT_FSIZE: writes past it fail
with EFBIG, and Python ignores the SIGXFSZ that comes with them), set in the server's child
process before it runs, so no mount is needed. The data directory goes away by rmtree or
rename. Each server is a child process: a halt is `os._exit(70)`.
"""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.admin import ResourceType as ConfigResourceType
from minicoord.server.process import ServerProcess, start_server_process

pytestmark = pytest.mark.timeout(120)

HALTED = 70


def _file_size_limit(limit: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _exit_code(server: ServerProcess, within_s: float) -> int | None:
    try:
        return server.proc.wait(within_s)
    except subprocess.TimeoutExpired:
        return None


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
    settings: dict[str, Any] = {
        "configs": {"log.flush.policy": "none"},
        "topics": [("t", 1)],
        "data_dir": data,
    }
    server = start_server_process(**settings, preexec_fn=_file_size_limit(256 * 1024))
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
        code = _exit_code(server, within_s=10)
        assert code == HALTED, f"exit {code} after {sent} records sent\n{server.log}"
        assert "cannot write a log" in server.log and "halting" in server.log, server.log
    finally:
        server.stop()
    assert acked, "nothing was acknowledged before the disk filled"

    again = start_server_process(**settings)
    try:
        values = _read_back(again.bootstrap, "t")
    finally:
        again.stop()
    # What reached the disk is the records in order, none missing before the last, none twice
    # (`none` may lose the last second of acknowledged records; it must not lose more).
    assert values == list(range(len(values))), values[:20]
    assert len(values) >= acked[0] + 1


def test_a_full_disk_at_shutdown_under_flush_policy_none_halts_the_server(
    tmp_path: Path,
) -> None:
    # The record is acknowledged from memory; SIGTERM follows at once, so (but for a
    # periodic write falling between the two, which halts the same way) the shutdown's own
    # write is the one that fails. It used to end as exit 1 with one line on stderr.
    server = start_server_process(
        configs={"log.flush.policy": "none"},
        topics=[("t", 1)],
        data_dir=tmp_path / "data",
        preexec_fn=_file_size_limit(256 * 1024),
    )
    try:
        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
        producer.produce("t", value=b"x" * 300_000)
        assert producer.flush(10) == 0
        server.proc.send_signal(signal.SIGTERM)
        code = _exit_code(server, within_s=10)
        assert code == HALTED, f"exit {code}\n{server.log}"
        assert "cannot write a log" in server.log and "halting" in server.log, server.log
    finally:
        server.stop()


@pytest.mark.parametrize("how", ["removed", "renamed"])
def test_a_data_directory_gone_under_the_server_halts_it(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    server = start_server_process(topics=[("kept", 1)], data_dir=data)
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
        code = _exit_code(server, within_s=10)
        assert code == HALTED, f"exit {code}\n{server.log}"
        assert "cannot use the data directory handling CreateTopics" in server.log, server.log
        assert not data.exists(), "the data directory was made again"
    finally:
        server.stop()


def test_a_cleaner_that_cannot_write_halts_the_server(tmp_path: Path) -> None:
    # Kafka's cleaner takes its log directory offline on an IOException, and the broker
    # halts. Here the cleaner used to log the failure every round and serve on.
    data = tmp_path / "data"
    server = start_server_process(configs={"log.cleaner.backoff.ms": 200}, data_dir=data)
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        compacted = {"cleanup.policy": "compact", "segment.ms": "1000",
                     "min.cleanable.dirty.ratio": "0.99"}  # fmt: skip
        admin.create_topics([NewTopic("c", 1, config=compacted)])["c"].result(10)
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
        for round_ in range(2):  # two closed segments of about 400 KB, rolled by segment.ms
            for key in range(1000):
                producer.produce("c", key=b"k%d" % key, value=b"%d" % round_ + b"v" * 400)
            assert producer.flush(20) == 0
            time.sleep(1.2)
        producer.produce("c", key=b"roll", value=b"x")
        assert producer.flush(10) == 0
        # The disk fills: no file may grow past 200 KB, the cleaner's output included.
        resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE, (200_000, 200_000))
        dirty = ConfigResource(
            ConfigResourceType.TOPIC, "c",
            incremental_configs=[ConfigEntry("min.cleanable.dirty.ratio", "0.01",
                                             incremental_operation=AlterConfigOpType.SET)],
        )  # fmt: skip
        admin.incremental_alter_configs([dirty])[dirty].result(10)
        code = _exit_code(server, within_s=15)
        assert code == HALTED, f"exit {code}\n{server.log}"
        assert "cannot clean c-0" in server.log and "halting" in server.log, server.log
    finally:
        server.stop()

    again = start_server_process(data_dir=data)
    try:
        consumer = Consumer(
            {"bootstrap.servers": again.bootstrap, "group.id": "reader",
             "enable.auto.commit": False}
        )  # fmt: skip
        consumer.assign([TopicPartition("c", 0, 0)])
        latest: dict[bytes, bytes] = {}
        deadline = time.monotonic() + 30
        while len(latest) < 1001 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                latest[message.key()] = message.value()[:1]
        consumer.close()
    finally:
        again.stop()
    # Nothing was lost to the failed cleaning: every key, with its last value.
    assert len(latest) == 1001
    assert {v for k, v in latest.items() if k != b"roll"} == {b"1"}
