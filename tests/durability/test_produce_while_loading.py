"""Produce requests that reach a restarted server while its topic partitions load wait for
them, and are handled in the order they came (server/data/produce_gate.py).

Answered NOT_LEADER_OR_FOLLOWER, an idempotent producer's pipeline was split: its first
batches refused, a later one met the loaded partition with a gap in its sequence, and
librdkafka then bumped its epoch and wrote again what a crash had written unacknowledged
(sweep14-an). Kafka reads no request before its logs are loaded. Here the server's storage
thread is held until the test lets it go, so the requests surely arrive while the partition
is loading.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from durakit import batch
from kafka.protocol.producer import ProduceRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.app import Server
from minicoord.server.config import Config

pytestmark = pytest.mark.timeout(60)

TOPIC = "loading"
PRODUCER = 4242


def produce(
    client: ProtocolClient, sequence: int, partition: int = 0, idempotent: bool = True
) -> Any:
    value = b"v%d" % sequence
    records = batch(value, PRODUCER, 0, sequence) if idempotent else batch(value)
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            data(
                name=TOPIC,
                partition_data=[data.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )
    return client.request(request, 9)


def answer(response: Any) -> tuple[int, int]:
    p = response.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


class HeldPool(concurrent.futures.ThreadPoolExecutor):
    """The server's storage thread, which runs nothing until `release` is set."""

    def __init__(self) -> None:
        super().__init__(1, "held-storage")
        self.release = threading.Event()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        def held() -> Any:
            self.release.wait(30)
            return fn(*args, **kwargs)

        return super().submit(held)


@contextlib.asynccontextmanager
async def held_restart(data_dir: Path) -> AsyncIterator[tuple[Server, HeldPool]]:
    """The server on `data_dir` again, its storage thread held until the pool's `release`."""
    restarted = Server(Config(), "127.0.0.1", 0, data_dir=data_dir)
    pool = HeldPool()
    storage = restarted._storage
    storage._pool.shutdown()
    storage._pool = pool
    async with restarted:
        try:
            yield restarted, pool
        finally:
            pool.release.set()  # else a failed check leaves the server's stop waiting on it


@pytest.mark.asyncio
async def test_produce_waits_for_a_loading_partition_and_keeps_its_order(tmp_path: Path) -> None:
    async with Server(Config(), "127.0.0.1", 0, topics=[(TOPIC, 2)], data_dir=tmp_path) as first:
        client = await ProtocolClient.connect("127.0.0.1", first.port)
        for sequence in range(3):
            assert answer(await produce(client, sequence)) == (0, sequence)
        await client.close()

    async with held_restart(tmp_path) as (restarted, pool):
        await _pipeline_while_loading(restarted, pool)


async def _pipeline_while_loading(restarted: Server, pool: HeldPool) -> None:
    client = await ProtocolClient.connect("127.0.0.1", restarted.port)
    # Pipelined on one connection while partition 0 cannot load: a retry of sequence 2
    # (written, its answer lost), then 3 and 4, and one for partition 1 behind them.
    waiting = [asyncio.ensure_future(produce(client, s)) for s in (2, 3, 4)]
    other = asyncio.ensure_future(produce(client, 0, partition=1))
    done, _ = await asyncio.wait([*waiting, other], timeout=0.5)
    assert not done, "answered while the partition was loading"
    pool.release.set()
    answers = [answer(r) for r in await asyncio.wait_for(asyncio.gather(*waiting), 20)]
    # The retry is recognised (its offset, no second copy); 3 and 4 follow in order.
    assert answers == [(0, 2), (0, 3), (0, 4)]
    assert answer(await other)[0] == ErrorCode.NONE
    # Once loaded, a Produce is handled at once.
    assert answer(await asyncio.wait_for(produce(client, 5), 10)) == (0, 5)
    await client.close()


@pytest.mark.asyncio
async def test_a_held_produce_whose_connection_closed_is_not_written(tmp_path: Path) -> None:
    # A client whose request timed out closes its connection and sends the batch again;
    # Kafka never reads what waited in the closed socket. Written too, a plain producer's
    # batch would be stored twice (sweep14-ao).
    async with Server(Config(), "127.0.0.1", 0, topics=[(TOPIC, 1)], data_dir=tmp_path) as first:
        client = await ProtocolClient.connect("127.0.0.1", first.port)
        assert answer(await produce(client, 100, idempotent=False)) == (0, 0)
        await client.close()

    async with held_restart(tmp_path) as (restarted, pool):
        gone = await ProtocolClient.connect("127.0.0.1", restarted.port)
        abandoned = asyncio.ensure_future(produce(gone, 101, idempotent=False))
        await asyncio.sleep(0.2)  # read and held by the server
        await gone.close()
        abandoned.cancel()
        again = await ProtocolClient.connect("127.0.0.1", restarted.port)
        retry = asyncio.ensure_future(produce(again, 101, idempotent=False))
        await asyncio.sleep(0.2)
        pool.release.set()
        # The abandoned copy was dropped: the retry takes the next offset, 1.
        assert answer(await asyncio.wait_for(retry, 20)) == (0, 1)
        assert answer(await produce(again, 102, idempotent=False)) == (0, 2)
        await again.close()
