"""The `kafka` stand-in of the serve process: codecs without the client, and the client on demand.

Each case runs in a fresh interpreter: this test process imported kafka-python long ago.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from minicoord.server import lazy_kafka


def run_child(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


CLIENT_MODULES = ("kafka.admin", "kafka.consumer", "kafka.producer", "kafka.net")


def test_codecs_import_without_the_client_package() -> None:
    out = run_child(
        f"""
        import sys
        from minicoord.server import lazy_kafka

        assert lazy_kafka.defer_client_package()
        from kafka.protocol.metadata import ApiVersionsRequest
        from kafka.record.default_records import DefaultRecordBatchBuilder
        import kafka.codec

        assert ApiVersionsRequest.API_KEY == 18
        assert not lazy_kafka.client_package_loaded()
        print(sorted(m for m in {CLIENT_MODULES!r} if m in sys.modules))
        """
    )
    assert out.strip() == "[]"


def test_the_client_package_loads_when_asked_for_in_the_same_process() -> None:
    out = run_child(
        """
        import importlib.metadata
        import sys
        from minicoord.server import lazy_kafka

        lazy_kafka.defer_client_package()
        stand_in = sys.modules["kafka"]
        from kafka.protocol.consumer import HeartbeatRequest  # a codec first

        from kafka import KafkaConsumer, TopicPartition
        import kafka

        assert kafka is stand_in, "the package object is the one submodules hang off"
        assert lazy_kafka.client_package_loaded()
        assert KafkaConsumer.__module__ == "kafka.consumer.group"
        assert kafka.KafkaAdminClient.__name__ == "KafkaAdminClient"
        assert kafka.__version__ == importlib.metadata.version("kafka-python")
        assert TopicPartition("t", 1).partition == 1
        assert kafka.protocol.consumer.HeartbeatRequest is HeartbeatRequest
        try:
            kafka.NoSuchThing
        except AttributeError:
            pass
        else:
            raise AssertionError("a missing attribute must stay missing")
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_star_import_and_attribute_probes_load_the_package() -> None:
    out = run_child(
        """
        from minicoord.server import lazy_kafka

        lazy_kafka.defer_client_package()
        import kafka

        assert hasattr(kafka, "KafkaProducer")
        namespace = {}
        exec("from kafka import *", namespace)
        assert "KafkaConsumer" in namespace
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_no_stand_in_once_kafka_is_imported() -> None:
    # This process imported kafka-python already: nothing to defer, nothing replaced.
    import kafka

    assert lazy_kafka.defer_client_package() is False
    assert sys.modules["kafka"] is kafka
    assert lazy_kafka.client_package_loaded()
