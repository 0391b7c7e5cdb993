"""Idempotent producers outlive their batches across a restart, as in Kafka.

Kafka keeps each partition's producer state in `.snapshot` files written at every segment
roll and at a clean shutdown. When DeleteRecords, retention or compaction has removed a
producer's batches, a restart still knows it: a retry of its last batch is answered with the
original offset (not written twice), and a zombie with an older epoch is fenced. Here every
batch gets a segment of its own (segment.ms=1), and DeleteRecords removes the producers'
batches before the server restarts, cleanly or killed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from durakit import Node, _request, batch
from kafka.protocol.admin import CreateTopicsRequest, DeleteRecordsRequest
from kafka.protocol.producer import ProduceRequest
from minicoord.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

TOPIC = "zombies"
A, B = 7001, 7002  # producer ids


async def produce(port: int, records: bytes) -> tuple[int, int]:
    """Produce v9, acks=-1: (error code, base offset)."""
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            data(name=TOPIC, partition_data=[data.PartitionProduceData(index=0, records=records)])
        ],
    )
    response = await _request(port, request, 9)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


async def setup(port: int) -> None:
    new = CreateTopicsRequest.CreatableTopic
    made = await _request(
        port,
        CreateTopicsRequest(
            topics=[
                new(
                    name=TOPIC,
                    num_partitions=1,
                    replication_factor=-1,
                    assignments=[],
                    configs=[new.CreatableTopicConfig(name="segment.ms", value="1")],
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        7,
    )
    assert made.topics[0].error_code == 0


async def write(port: int, records: bytes) -> int:
    # A batch more than segment.ms after its segment's first rolls it: one segment each.
    await asyncio.sleep(0.005)
    error, offset = await produce(port, records)
    assert error == 0
    return offset


DAY_MS = 86_400_000


async def produce_when_loaded(port: int, records: bytes) -> tuple[int, int]:
    # Topic partitions load in the background: NOT_LEADER_OR_FOLLOWER until then.
    for _ in range(200):
        answer = await produce(port, records)
        if answer[0] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return answer
        await asyncio.sleep(0.05)
    raise AssertionError("the partition did not load")


@pytest.mark.parametrize("restart", ["clean", "killed"])
async def test_a_producer_whose_batches_are_gone_is_still_known_after_a_restart(
    node_factory: Any, restart: str
) -> None:
    node: Node = node_factory({}, [])
    node.start()
    await setup(node.port)
    offsets = [await write(node.port, batch(b"a%d" % s, A, 0, s)) for s in range(3)]
    assert offsets == [0, 1, 2]
    assert await write(node.port, batch(b"b0", B, 0, 0)) == 3
    assert await write(node.port, batch(b"b1", B, 1, 0)) == 4  # B's new epoch fences epoch 0
    for i in range(3):
        await write(node.port, batch(b"plain%d" % i))  # offsets 5-7; each write rolls
    partition = DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition
    deleted = await _request(
        node.port,
        DeleteRecordsRequest(
            topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(
                    name=TOPIC, partitions=[partition(partition_index=0, offset=6)]
                )
            ],
            timeout_ms=5000,
        ),
        2,
    )
    assert deleted.topics[0].partitions[0].low_watermark == 6
    if restart == "clean":
        node.stop()
    else:
        node.kill()
    node.start()

    async def produce_loaded(records: bytes) -> tuple[int, int]:
        return await produce_when_loaded(node.port, records)

    # A's retry of its last batch, whose answer was lost: its offset, not a second copy.
    assert await produce_loaded(batch(b"a2", A, 0, 2)) == (0, 2)
    # B's zombie at the epoch B left behind: fenced, as before the restart.
    assert (await produce_loaded(batch(b"b-zombie", B, 0, 1)))[0] == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    # A sequence gap is out of order; A's next sequence goes on at the log's end.
    assert (await produce_loaded(batch(b"a9", A, 0, 9)))[0] == (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert await produce_loaded(batch(b"a3", A, 0, 3)) == (0, 8)
    node.stop()


async def test_a_producer_past_its_expiration_is_forgotten_at_a_restart(node_factory: Any) -> None:
    """Kafka skips expired producers when it loads their state (producer.id.expiration.ms,
    one day, by the last batch's timestamp): a retry of a batch two days old is known before
    the restart, and after it is a new append."""
    node: Node = node_factory({}, [])
    node.start()
    await setup(node.port)
    old = int(time.time() * 1000) - 2 * DAY_MS
    assert await write(node.port, batch(b"old", A, 0, 0, timestamp=old)) == 0
    assert await write(node.port, batch(b"new", B, 0, 0)) == 1
    assert await produce(node.port, batch(b"old", A, 0, 0, timestamp=old)) == (0, 0)
    node.stop()
    node.start()
    assert await produce_when_loaded(node.port, batch(b"old", A, 0, 0, timestamp=old)) == (0, 2)
    assert await produce(node.port, batch(b"new", B, 0, 0)) == (0, 1)  # B is still known
    node.stop()


async def test_a_running_server_forgets_expired_producers_at_its_check_interval(
    node_factory: Any,
) -> None:
    node: Node = node_factory({"producer.id.expiration.check.interval.ms": 50}, [])
    node.start()
    await setup(node.port)
    old = int(time.time() * 1000) - 2 * DAY_MS
    assert await write(node.port, batch(b"old", A, 0, 0, timestamp=old)) == 0
    # Written, then forgotten at the next check: the retry is appended anew.
    answers = []
    for _ in range(100):
        answers.append(await produce(node.port, batch(b"old", A, 0, 0, timestamp=old)))
        if answers[-1] != (0, 0):
            break
        await asyncio.sleep(0.02)
    assert answers[-1] == (0, 1), answers
    node.stop()
