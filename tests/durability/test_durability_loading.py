"""COORDINATOR_LOAD_IN_PROGRESS while a large offsets partition is replayed at start.

The test writes one partition's log directly (300,000 offset commits over 3,000 keys, with
PartitionLog.append, as the server would), then starts the server. Right after its ready
line a group of that partition is answered COORDINATOR_LOAD_IN_PROGRESS while a group of
another partition is served normally (and the big one is still loading afterwards, so the
two really overlapped); then, bounded, the big partition serves its groups' offsets: the
exact last value of every key.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from durakit import (
    Node,
    find_coordinator_error,
    group_in_partition,
    groups_in_partition,
    join_error,
    offset_commit,
    offset_fetch,
    wait_for_value,
)
from kafka import KafkaConsumer, TopicPartition
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record, offset_commit_key, offset_commit_value
from minicoord.storage.log import OFFSETS_TOPIC, log_dir
from minicoord.storage.partition_log import PartitionLog

pytestmark = pytest.mark.timeout(90)

TOPIC = "bulk"
BIG_PARTITION = 11
# Enough that loading (about 2 s here) outlasts the requests made meanwhile with room to spare.
RECORDS = 300_000
BATCH = 1000
BULK_GROUPS = groups_in_partition(BIG_PARTITION, "durability-bulk", 300)
KEYS = [(g, p) for p in range(10) for g in BULK_GROUPS]  # 3,000 distinct keys
TARGET = group_in_partition(BIG_PARTITION, "durability-loading-target")
ELSEWHERE = group_in_partition(BIG_PARTITION + 1, "durability-loading-elsewhere")
TARGET_OFFSETS = {0: 123_456_789, 1: 987_654_321}


def write_big_partition(data_dir: Path) -> dict[tuple[str, int], int]:
    """RECORDS offset commits over KEYS, then TARGET's; returns each bulk key's last offset."""
    encoded = {key: offset_commit_key(key[0], TOPIC, key[1]) for key in KEYS}
    plog = PartitionLog(
        log_dir(data_dir, OFFSETS_TOPIC, BIG_PARTITION), str(BIG_PARTITION), 8 * 1024 * 1024
    )
    plog.open()
    last: dict[tuple[str, int], int] = {}
    timestamp = int(time.time() * 1000)
    for start in range(0, RECORDS, BATCH):
        records = []
        for i in range(start, start + BATCH):
            key = KEYS[i % len(KEYS)]
            records.append(Record(encoded[key], offset_commit_value(i, -1, "", timestamp)))
            last[key] = i
        plog.append(records, timestamp)
    target = [
        Record(offset_commit_key(TARGET, TOPIC, p), offset_commit_value(o, -1, "", timestamp))
        for p, o in TARGET_OFFSETS.items()
    ]
    plog.append(target, timestamp)
    plog.flush()
    plog.close()
    assert plog.next_offset == RECORDS + len(TARGET_OFFSETS)
    return last


async def test_loading_partition_answers_load_in_progress_others_are_served(
    node_factory: Any,
) -> None:
    node: Node = node_factory({}, [(TOPIC, 10)])
    last = write_big_partition(node.data_dir)
    assert len(last) == len(KEYS) == 3000

    node.start()
    loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    # Right after the ready line.
    # The group's error alone, no partitions, as Kafka answers OffsetFetch v2+.
    assert await offset_fetch(node.port, TARGET, TOPIC, [0, 1]) == (loading, {})
    assert await join_error(node.port, TARGET) == loading
    assert await offset_commit(node.port, TARGET, TOPIC, {0: 1}) == [loading]
    # The coordinator is this node: clients are sent here and retry.
    assert await find_coordinator_error(node.port, TARGET) == ErrorCode.NONE

    # A group of another partition is served normally meanwhile: reads, writes, joins.
    assert await offset_fetch(node.port, ELSEWHERE, TOPIC, [0]) == (0, {0: -1})
    assert await offset_commit(node.port, ELSEWHERE, TOPIC, {0: 42}) == [0]
    assert await offset_fetch(node.port, ELSEWHERE, TOPIC, [0]) == (0, {0: 42})
    assert await join_error(node.port, ELSEWHERE) == ErrorCode.MEMBER_ID_REQUIRED
    # ... while the big partition was still loading.
    # The group's error alone, no partitions, as Kafka answers OffsetFetch v2+.
    assert await offset_fetch(node.port, TARGET, TOPIC, [0, 1]) == (loading, {})
    assert f"loaded offsets partition {BIG_PARTITION}:" not in node.log

    # A stock client asking now retries through COORDINATOR_LOAD_IN_PROGRESS by itself:
    # kafka-python reads OffsetFetch's top-level error. (aiokafka reads only partitions'
    # errors and would see no committed offset, as against Kafka; test_fault_injection.)
    def committed() -> int | None:
        consumer = KafkaConsumer(
            bootstrap_servers=node.bootstrap, group_id=TARGET, enable_auto_commit=False
        )
        try:
            return consumer.committed(TopicPartition(TOPIC, 1))
        finally:
            consumer.close()

    got = await asyncio.wait_for(asyncio.to_thread(committed), 60)
    assert got == TARGET_OFFSETS[1]

    # Loaded: the exact last value of every key.
    error, offsets = await wait_for_value(
        lambda: offset_fetch(node.port, TARGET, TOPIC, [0, 1]),
        lambda r: r[0] != loading,
        60,
        what="the big partition to load",
    )
    assert (error, offsets) == (0, TARGET_OFFSETS)
    for group in (BULK_GROUPS[0], BULK_GROUPS[150], BULK_GROUPS[-1]):
        expected = {p: last[(group, p)] for p in range(10)}
        assert await offset_fetch(node.port, group, TOPIC, list(range(10))) == (0, expected)
    line = (
        f"loaded offsets partition {BIG_PARTITION}: {RECORDS + 2} records, 0 groups, "
        f"{len(KEYS) + 2} offsets"
    )
    node.wait_log(line)
    assert await offset_fetch(node.port, ELSEWHERE, TOPIC, [0]) == (0, {0: 42})
