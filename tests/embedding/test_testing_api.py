"""The embedding API and the pytest plugin that installing minicoord provides."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.records import Record, offset_commit_key, offset_commit_value
from minicoord.server.coordinator.partitioning import partition_for
from minicoord.storage.log import OFFSETS_TOPIC, log_dir
from minicoord.storage.partition_log import PartitionLog
from minicoord.testing import EmbeddedServer, running

pytest_plugins = ["pytester"]


async def test_running_serves_real_clients_and_stops() -> None:
    started = time.perf_counter()
    with running(configs={"group.min.session.timeout.ms": 1000}, topics=[("orders", 3)]) as server:
        ready_ms = (time.perf_counter() - started) * 1000
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            response = await client.request(ApiVersionsRequest(version=0))
            assert response.error_code == 0
        assert server.call(lambda: server.server.broker.topics.get("orders").partitions) == 3
        assert server.config.group_min_session_timeout_ms == 1000
    # Measured, not asserted tightly: the closing note reports it; this only catches a hang.
    assert ready_ms < 5000
    with pytest.raises(OSError):
        await ProtocolClient.connect(host, int(port))


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown config"), running(configs={"no.such.thing": 1}):
        pass


def test_the_plugin_provides_function_and_session_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        minicoord_configs =
            group.min.session.timeout.ms=1234
        minicoord_topics =
            shared:4
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.minicoord(configs={"num.partitions": 7}, topics=[("orders", 2)])
        def test_function_scoped(minicoord):
            broker = minicoord.server.broker
            assert minicoord.call(lambda: broker.config.num_partitions) == 7
            assert minicoord.call(lambda: broker.topics.get("orders").partitions) == 2
            assert minicoord.bootstrap.startswith("127.0.0.1:")

        def test_session_scoped(minicoord_session):
            broker = minicoord_session.server.broker
            assert minicoord_session.call(
                lambda: broker.config.group_min_session_timeout_ms
            ) == 1234
            assert minicoord_session.call(lambda: broker.topics.get("shared").partitions) == 4

        def test_session_is_shared(minicoord_session, request):
            assert minicoord_session.bootstrap == request.getfixturevalue(
                "minicoord_session"
            ).bootstrap
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_topics_may_be_given_as_the_command_line_gives_them() -> None:
    with running(topics=["orders:3", ("audit", 1)]) as server:
        broker = server.server.broker
        assert server.call(lambda: broker.topics.get("orders").partitions) == 3
        assert server.call(lambda: broker.topics.get("audit").partitions) == 1
    for bad, why in [
        ("orders", "expected NAME:PARTITIONS"),
        (("a", 1, 2), "a topic is"),
        (("orders", "3"), "a topic is"),
        (("bad name", 1), "contains one or more characters other than"),
        (("__consumer_offsets", 3), "the server's own topic"),
        ("__cluster_metadata:1", "the server's own topic"),
        (("big", 10_001), "more than CreateTopics allows"),
    ]:
        with pytest.raises(ValueError, match=why), running(topics=[bad]):  # type: ignore[list-item]
            pass


def test_a_second_server_on_a_data_dir_says_it_is_this_process(tmp_path: Path) -> None:
    with (
        running(data_dir=tmp_path),
        pytest.raises(Exception, match="another server of this process"),
        running(data_dir=tmp_path),
    ):
        pass


def test_bad_ini_lines_are_named_with_what_is_wrong(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        minicoord_configs =
            group.min.session.timeout.ms = 1234
            justakey
        minicoord_topics =
            orders
        """
    )
    pytester.makepyfile(
        """
        def test_session(minicoord_session):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*minicoord_configs: expected key=value, got 'justakey'*"])
    pytester.makeini(
        """
        [pytest]
        minicoord_configs =
            group.min.session.timeout.ms = 1234
        minicoord_topics =
            orders
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*minicoord_topics: expected NAME:PARTITIONS, got 'orders'*"])
    # Well formed, but a config the server does not know: named as a usage error too.
    pytester.makeini(
        """
        [pytest]
        minicoord_configs =
            no.such.config = 1
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*UsageError*minicoord_configs*unknown config 'no.such.config'*"])


def test_a_marker_keyword_it_does_not_know_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.minicoord(topic=[("orders", 2)])
        def test_typo(minicoord):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*@pytest.mark.minicoord takes keywords*not topic*"])
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.minicoord(configs={"no.such.config": 1})
        def test_unknown(minicoord):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*UsageError*@pytest.mark.minicoord: unknown config 'no.such.config'*"]
    )
    result.assert_outcomes(errors=1)


def test_a_failed_start_gives_its_data_dir_and_ports_back(tmp_path: Path) -> None:
    # The control port is taken: the start fails after the data directory was locked and the
    # Kafka listener bound; both are free again for the next server of this process.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            kafka_port = probe.getsockname()[1]
        with (
            pytest.raises(OSError, match="address already in use"),
            running(port=kafka_port, control_port=busy, data_dir=tmp_path),
        ):
            pass
    with running(port=kafka_port, data_dir=tmp_path, topics=[("kept", 2)]) as server:
        assert server.port == kafka_port
    with running(data_dir=tmp_path) as server:
        broker = server.server.broker
        assert server.call(lambda: broker.topics.get("kept").partitions) == 2


def test_running_on_a_data_dir_returns_with_its_groups_loaded(tmp_path: Path) -> None:
    # Enough records that replaying them takes a while: the Python API reads the groups as
    # soon as running() returns, so it returns once they are loaded.
    group = "reloaded"
    partition = partition_for(group, 50)
    plog = PartitionLog(log_dir(tmp_path, OFFSETS_TOPIC, partition), str(partition), 1 << 26)
    plog.open()
    keys = [offset_commit_key(group, "t", p) for p in range(10)]
    for start in range(0, 100_000, 1000):
        plog.append(
            [
                Record(keys[i % 10], offset_commit_value(i, -1, "", 0))
                for i in range(start, start + 1000)
            ],
            0,
        )
    plog.flush()
    plog.close()
    with running(data_dir=tmp_path, topics=[("t", 10)]) as server:
        described = server.control.describe_group(group)
        assert described is not None
        assert {o["partition"]: o["committed"] for o in described["offsets"]} == {
            p: 99_990 + p for p in range(10)
        }


def test_a_start_that_times_out_leaves_nothing_running(tmp_path: Path) -> None:
    # A data dir slower to load than the start's timeout: TimeoutError, and the server is
    # stopped (its port and the directory's lock given back), not left running unseen.
    group = "slow"
    partition = partition_for(group, 50)
    plog = PartitionLog(log_dir(tmp_path, OFFSETS_TOPIC, partition), str(partition), 1 << 26)
    plog.open()
    key = offset_commit_key(group, "t", 0)
    for start in range(0, 50_000, 1000):
        plog.append(
            [Record(key, offset_commit_value(i, -1, "", 0)) for i in range(start, start + 1000)], 0
        )
    plog.flush()
    plog.close()
    with (
        pytest.raises(TimeoutError, match="did not start within"),
        running(data_dir=tmp_path, start_timeout=0.01),
    ):
        pass
    with running(data_dir=tmp_path) as server:
        described = server.control.describe_group(group)
        assert described is not None


def test_a_server_not_running_says_so_when_asked_to_act() -> None:
    server = EmbeddedServer()
    with pytest.raises(RuntimeError, match="not running"):
        server.control.groups()
    with server:
        assert server.control.groups() == []
    with pytest.raises(RuntimeError, match="not running"):
        server.control.force_rebalance("g")


def test_the_plugin_hides_kafka_pythons_legacy_resource_warnings_only(
    pytester: pytest.Pytester,
) -> None:
    # Serving loads kafka-python's protocol classes, whose schemas it reads with the legacy
    # importlib.resources.read_text: without the plugin's filters a user's suite summary
    # shows two DeprecationWarnings per schema. The user's own call still warns.
    pytester.makepyfile(
        """
        import importlib.resources
        from confluent_kafka import Consumer, Producer

        def test_serve(minicoord):
            producer = Producer({"bootstrap.servers": minicoord.bootstrap, "log_level": 0})
            producer.produce("t", b"x")
            assert producer.flush(10) == 0
            consumer = Consumer(
                {"bootstrap.servers": minicoord.bootstrap, "group.id": "g", "log_level": 0}
            )
            consumer.subscribe(["t"])
            for _ in range(50):
                consumer.poll(0.1)
                if consumer.assignment():
                    break
            consumer.close()

        def test_own_call():
            importlib.resources.read_text("email", "__init__.py")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "test_own_call" in out and out.count("read_text is deprecated") == 1, out
    assert "open_text is deprecated" not in out, out
