"""The error messages of Produce answers, as Kafka sends them.

Kafka's ReplicaManager sends a partition's error message only where it marks it custom: a
batch refused for its records' errors (INVALID_RECORD, INVALID_TIMESTAMP, with the record
errors), and a transactional batch for a partition its transaction does not hold. For every
other error (a batch too large, min.insync.replicas, sequences, a whole request refused for
its transactional id) it sends none, and clients show the error's own text: so does
minicoord, and its log says why.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from datakit import batch, create_topics, new_topic
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

CONFIGS = {
    "small": {"max.message.bytes": "200"},
    "misr": {"min.insync.replicas": "2"},
    "keyed": {"cleanup.policy": "compact"},
}


def _produce(
    parts: list[tuple[str, int, bytes]], acks: int = -1, transactional_id: str | None = None
) -> Any:
    data: dict[str, list[Any]] = {}
    for topic, index, records in parts:
        data.setdefault(topic, []).append(
            ProduceRequest.TopicProduceData.PartitionProduceData(index=index, records=records)
        )
    return ProduceRequest(
        version=9,
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(name=name, partition_data=partitions)
            for name, partitions in data.items()
        ],
    )


def _answers(answer: Any) -> list[tuple[str, int, int, str | None, int]]:
    return [
        (t.name, p.index, p.error_code, p.error_message, len(p.record_errors))
        for t in answer.responses
        for p in t.partition_responses
    ]


def _now() -> int:
    # The server's clock: a batch's CreateTime must lie within an hour of it.
    return int(time.time() * 1000)


def _records(records: list[tuple[bytes | None, bytes]] | None = None, at: int = 0) -> bytes:
    return batch(records or [(b"k", b"v")], timestamp=at or _now())


def _transactional_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=1000,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=_now(), key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


@pytest.mark.asyncio
async def test_produce_errors_carry_a_message_only_where_kafka_sends_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="minicoord.requests")
    with running(topics=[("plain", 2)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            made = await client.request(
                create_topics(*(new_topic(n, 1, configs=c) for n, c in CONFIGS.items())), 7
            )
            assert [t.error_code for t in made.topics] == [0, 0, 0]
            big = _records([(b"k", b"x" * 400)])
            answer = await client.request(
                _produce([("small", 0, big), ("misr", 0, _records()), ("plain", 0, _records())]), 9
            )
            assert _answers(answer) == [
                ("small", 0, ErrorCode.MESSAGE_TOO_LARGE, None, 0),
                ("misr", 0, ErrorCode.NOT_ENOUGH_REPLICAS, None, 0),
                ("plain", 0, ErrorCode.NONE, None, 0),
            ]
            # Record-level refusals keep Kafka's message and the record errors.
            future = _now() + 10 * 3_600_000
            answer = await client.request(
                _produce(
                    [
                        ("keyed", 0, _records([(None, b"no key")])),
                        ("plain", 1, _records(at=future)),
                    ]
                ),
                9,
            )
            [(_, _, keyless, keyless_message, keyless_errors), timed] = _answers(answer)
            assert (keyless, keyless_errors) == (ErrorCode.INVALID_RECORD, 1)
            assert keyless_message is not None
            assert keyless_message.startswith("One or more records have been rejected")
            assert timed[2:] == (
                ErrorCode.INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp",
                1,
            )
            # Transactional records without a transactional id: the whole request is
            # refused, every partition, the unknown one too, with no message.
            answer = await client.request(
                _produce([("plain", 0, _transactional_batch()), ("nosuch", 0, _records())]), 9
            )
            assert _answers(answer) == [
                ("plain", 0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, 0),
                ("nosuch", 0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, 0),
            ]
    # What the answers leave out, the server's log says.
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "minicoord.requests")
    assert "MESSAGE_TOO_LARGE (the batch is" in logged
    assert "NOT_ENOUGH_REPLICAS (The size of the current ISR" in logged
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED (transactional records with no" in logged
