"""What `log.flush.policy=none` may lose, and what it may not.

`none` buffers records in the process and writes them about once a second: a SIGKILL loses
what was still buffered, so an acknowledged commit may come back older or not at all. What it
never does is damage the log: `minicoord log verify` exits 0 after the kill and the restart
truncates nothing (the one exception, a write() torn by the kill itself, is explained at
durakit.verify_after_kill: then verify names only a damaged tail and the restart truncates
exactly that). A clean SIGTERM stop writes everything acknowledged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from durakit import (
    Node,
    committed_on_disk,
    minicoord_log,
    offset_fetch,
    partition_of,
    reading,
    verify_after_kill,
    wait_for_value,
)

pytestmark = pytest.mark.timeout(90)

TOPIC = "lossy"
PARTITIONS = (0, 1)
GROUP = "durability-none-group"


def offsets_of(value: int) -> dict[int, int]:
    return {p: value + p for p in PARTITIONS}


async def commit(consumer: AIOKafkaConsumer, value: int) -> None:
    offsets = {
        TopicPartition(TOPIC, p): OffsetAndMetadata(o, "") for p, o in offsets_of(value).items()
    }
    await asyncio.wait_for(consumer.commit(offsets), 20)


async def served(node: Node, consumer: AIOKafkaConsumer) -> dict[int, int]:
    """committed() through the stock client, cross-checked with one raw OffsetFetch."""
    stock = {}
    for p in PARTITIONS:
        value = await asyncio.wait_for(consumer.committed(TopicPartition(TOPIC, p)), 20)
        if value is not None:
            stock[p] = value
    _error, raw = await wait_for_value(
        lambda: offset_fetch(node.port, GROUP, TOPIC, list(PARTITIONS)),
        lambda r: r[0] == 0,
        15,
        what="OffsetFetch without error",
    )
    assert stock == {p: o for p, o in raw.items() if o >= 0}, (stock, raw)
    return stock


async def restart_cleanly(node: Node, torn: bool) -> None:
    """Restart; the log loads with nothing truncated (but a torn tail, see verify_after_kill)
    and no partition failed."""
    node.start()
    await wait_for_value(
        reading(lambda: node.log),
        lambda log: f"loaded offsets partition {partition_of(GROUP)}:" in log,
        15,
        what="the group's partition to load",
    )
    assert ("truncating" in node.log) == torn, node.log
    assert "is not served" not in node.log, node.log


async def test_none_loses_at_most_the_buffered_tail_and_never_corrupts(node_factory: Any) -> None:
    node: Node = node_factory({"log.flush.policy": "none"}, [(TOPIC, len(PARTITIONS))])
    node.start()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=node.bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        retry_backoff_ms=50,
        request_timeout_ms=10_000,
    )
    await asyncio.wait_for(consumer.start(), 20)
    consumer.assign([TopicPartition(TOPIC, p) for p in PARTITIONS])
    outcomes = []
    try:
        # 1. A first commit, killed at once: it is there, or nothing is.
        await commit(consumer, 100)
        node.kill()
        torn = verify_after_kill(node.data_dir)
        on_disk = committed_on_disk(node.data_dir, GROUP, TOPIC)
        assert on_disk in ({}, offsets_of(100)), on_disk
        outcomes.append("kept" if on_disk else "lost")
        if on_disk or torn:
            await restart_cleanly(node, torn)
        else:
            node.start()  # nothing was written: there is no partition to load
            assert "truncating" not in node.log and "is not served" not in node.log
        assert await served(node, consumer) == on_disk

        # 2. A commit given time to reach the periodic write, then one killed at once: the
        #    second may be lost, the first is there (it was written, and the kill cannot
        #    damage what was written).
        await commit(consumer, 200)
        await wait_for_value(
            reading(lambda: committed_on_disk(node.data_dir, GROUP, TOPIC)),
            lambda d: d == offsets_of(200),
            10,
            what="the periodic write of the buffered commit",
        )
        await commit(consumer, 300)
        node.kill()
        torn = verify_after_kill(node.data_dir)
        on_disk = committed_on_disk(node.data_dir, GROUP, TOPIC)
        assert on_disk in (offsets_of(200), offsets_of(300)), on_disk
        outcomes.append("kept" if on_disk == offsets_of(300) else "lost")
        await restart_cleanly(node, torn)
        assert await served(node, consumer) == on_disk

        # 3. A clean stop writes everything acknowledged.
        await commit(consumer, 400)
        node.stop()
        verify = minicoord_log("verify", str(node.data_dir))
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert committed_on_disk(node.data_dir, GROUP, TOPIC) == offsets_of(400)
        await restart_cleanly(node, torn=False)
        assert await served(node, consumer) == offsets_of(400)
    finally:
        await asyncio.wait_for(consumer.stop(), 20)
    print(f"commits killed at once under `none`: {outcomes}")
