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


def test_record_code_runs_without_the_codec_packages_until_a_codec_is_used() -> None:
    out = run_child(
        """
        import sys
        from minicoord.server import lazy_kafka
        from minicoord.protocol import deferred

        lazy_kafka.defer_client_package()
        assert sorted(lazy_kafka.defer_codec_packages()) == ["crc32c", "snappy", "zstandard"]
        from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
        )
        builder.append(0, timestamp=5, key=b"k", value=b"v", headers=[])
        data = bytes(builder.build())
        batch = DefaultRecordBatch(data)
        assert batch.validate_crc(), "kafka-python's CRC through the stand-in"
        assert [r.value for r in batch] == [b"v"]
        # Nothing loaded the crc32c package's __init__ or a deferred codec.
        assert "importlib.metadata" not in sys.modules
        assert not any(deferred.loaded(m) for m in ("crc32c", "snappy", "zstandard"))

        import kafka.codec
        for encode, decode in (
            (kafka.codec.zstd_encode, kafka.codec.zstd_decode),
            (kafka.codec.snappy_encode, kafka.codec.snappy_decode),
        ):
            assert bytes(decode(encode(b"abc" * 100))) == b"abc" * 100
        assert deferred.loaded("zstandard") and deferred.loaded("snappy")

        import crc32c
        assert crc32c.__version__  # the package's own __init__, run on demand
        assert crc32c.crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C
        assert DefaultRecordBatch(data).validate_crc()
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_no_codec_stand_ins_once_the_packages_are_imported() -> None:
    out = run_child(
        """
        import sys
        import crc32c
        import zstandard
        from minicoord.server import lazy_kafka

        assert lazy_kafka.defer_codec_packages() == ["snappy"]
        assert sys.modules["crc32c"] is crc32c and sys.modules["zstandard"] is zstandard
        assert crc32c.crc32c.__module__ != lazy_kafka.__name__
        print("ok")
        """
    )
    assert out.strip() == "ok"
