"""Damaged offsets logs, through the real server.

A damaged last batch (cut short, a flipped bit the CRC catches, or a base offset below its
segment's: the base offset is outside the CRC) is a torn tail: the server truncates it with a
log line naming the file and byte position, and everything before it is served. Damage with
valid data after it cannot be repaired without losing acknowledged records: that partition is
not served (its groups get COORDINATOR_NOT_AVAILABLE), its file is left as it was, the other
partitions carry on, `minicoord log verify` exits non-zero naming the file, and `minicoord
log dump` shows what precedes the damage and names it.

The commits are sent raw, one request (so one record batch) each, so the test knows which
batch holds which commit.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from durakit import (
    CRC_COVERED_FROM,
    Node,
    batch_spans,
    cut_tail,
    find_coordinator_error,
    flip_bit,
    group_in_partition,
    join_error,
    list_offsets,
    minicoord_log,
    offset_commit,
    offset_fetch,
    partition_of,
    reading,
    segments,
    wait_for_value,
)
from minicoord.protocol.consumer_records import group_epoch_key
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record
from minicoord.storage.log import OFFSETS_TOPIC, log_dir
from minicoord.storage.partition_log import PartitionLog

pytestmark = pytest.mark.timeout(60)

TOPIC = "damaged"
PARTS = [0, 1]
DAMAGED_PARTITION = 7
HEALTHY_PARTITION = 23
GROUP = group_in_partition(DAMAGED_PARTITION, "durability-damaged")
NEIGHBOUR = group_in_partition(DAMAGED_PARTITION, "durability-neighbour")
OTHER = group_in_partition(HEALTHY_PARTITION, "durability-other")


def offsets(value: int) -> dict[int, int]:
    return {p: value + p for p in PARTS}


async def commit(node: Node, group: str, value: int) -> None:
    assert await offset_commit(node.port, group, TOPIC, offsets(value)) == [0, 0]


async def fetch(node: Node, group: str) -> tuple[int, dict[int, int]]:
    """OffsetFetch, waiting out COORDINATOR_LOAD_IN_PROGRESS only."""
    return await wait_for_value(
        lambda: offset_fetch(node.port, group, TOPIC, PARTS),
        lambda r: r[0] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        15,
        what=f"{group} to load",
    )


async def fill(node: Node, commits: int) -> None:
    """Commits 1..commits to GROUP (one batch each) and two to OTHER."""
    for value in range(1, commits + 1):
        await commit(node, GROUP, value * 100)
    await commit(node, OTHER, 7000)
    await commit(node, OTHER, 8000)


async def wait_loaded(node: Node) -> None:
    await wait_for_value(
        reading(lambda: node.log),
        lambda log: log.count("loaded offsets partition") + log.count("is not served") == 2,
        15,
        what="both partitions to load",
    )


@pytest.mark.parametrize("damage", ["cut-short", "bit-flip", "base-offset-sign-bit"])
async def test_damaged_last_batch_is_truncated_and_the_rest_served(
    node_factory: Any, damage: str
) -> None:
    node: Node = node_factory({}, [(TOPIC, 2)])
    node.start()
    await fill(node, 5)
    node.stop()
    [segment] = segments(node.data_dir, DAMAGED_PARTITION)
    spans = batch_spans(segment)
    assert len(spans) == 5
    start, size = spans[-1]
    if damage == "cut-short":
        cut_tail(segment, 7)
        dropped, reason = size - 7, "batch runs past the end of the file"
    elif damage == "bit-flip":
        flip_bit(segment, start + size - 3, 4)  # inside the last record: CRC-covered
        dropped, reason = size, "CRC-32C mismatch"
    else:
        # The base offset is not covered by the CRC; its sign bit makes an offset below the
        # segment's (the last batch holds offsets 8 and 9).
        flip_bit(segment, start, 7)
        dropped, reason = size, f"base offset {8 - 2**63} is below the segment's 0"
    verify = minicoord_log("verify", str(node.data_dir))
    assert verify.returncode == 1
    assert f"damaged tail (truncated at next start): {segment} at byte {start}: {reason}" in (
        verify.stdout
    )

    node.start()
    await wait_loaded(node)
    line = f"truncating {segment} at byte {start} ({dropped} bytes dropped): {reason}"
    node.wait_log(line)
    assert "is not served" not in node.log
    assert segment.stat().st_size == start
    # Everything before the damaged batch is there; the damaged commit is not.
    assert await fetch(node, GROUP) == (0, offsets(400))
    assert await fetch(node, OTHER) == (0, offsets(8000))
    # Appends continue where the log was cut, and survive the next restart.
    await commit(node, GROUP, 600)
    node.stop()
    assert minicoord_log("verify", str(node.data_dir)).returncode == 0
    node.start()
    assert await fetch(node, GROUP) == (0, offsets(600))
    assert "truncating" not in node.log


@pytest.mark.parametrize("where", ["early-batch", "closed-segment", "early-base-offset"])
async def test_damage_before_valid_data_fails_only_that_partition(
    node_factory: Any, where: str
) -> None:
    configs: dict[str, object] = {}
    if where == "closed-segment":
        configs["offsets.topic.segment.bytes"] = 1024  # rolls every few commits
    node: Node = node_factory(configs, [(TOPIC, 2)])
    node.start()
    await fill(node, 20)
    node.stop()
    files = segments(node.data_dir, DAMAGED_PARTITION)
    if where in ("early-batch", "early-base-offset"):
        assert len(files) == 1
        damaged = files[0]
        start, _size = batch_spans(damaged)[1]  # the second of twenty batches
    else:
        assert len(files) >= 3, files
        damaged = files[0]
        start, _size = batch_spans(damaged)[-1]  # the last batch of a closed segment
    if where == "early-base-offset":
        flip_bit(damaged, start, 7)  # the sign bit of the base offset (2), outside the CRC
        problem = f"base offset {2 - 2**63} is below the segment's 0"
    else:
        flip_bit(damaged, start + CRC_COVERED_FROM + 5, 2)
        problem = "CRC-32C mismatch"
    before = {f: f.read_bytes() for f in files}

    node.start()
    await wait_loaded(node)
    reason = f"{problem}, with valid data after it"
    line = (
        f"offsets partition {DAMAGED_PARTITION} is not served: {damaged} at byte {start}: {reason}"
    )
    node.wait_log(line)
    assert "truncating" not in node.log
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
    for group in (GROUP, NEIGHBOUR):
        assert partition_of(group) == DAMAGED_PARTITION
        # The group's error alone, no partitions, as Kafka answers OffsetFetch v2+.
        assert await fetch(node, group) == (unavailable, {})
        assert await join_error(node.port, group) == unavailable
        assert await find_coordinator_error(node.port, group) == unavailable
        assert await offset_commit(node.port, group, TOPIC, offsets(1)) == [unavailable] * 2
    # Another partition is served as before, reads and writes.
    assert await fetch(node, OTHER) == (0, offsets(8000))
    assert await join_error(node.port, OTHER) == ErrorCode.MEMBER_ID_REQUIRED
    await commit(node, OTHER, 9000)
    assert await fetch(node, OTHER) == (0, offsets(9000))
    node.stop()

    # Nothing was skipped, cut or rewritten: the evidence is intact for an operator.
    assert {f: f.read_bytes() for f in segments(node.data_dir, DAMAGED_PARTITION)} == before
    verify = minicoord_log("verify", str(node.data_dir))
    assert verify.returncode == 1
    assert f"corruption: {damaged} at byte {start}: {problem}" in verify.stdout
    assert "1 problem(s) found" in verify.stderr
    # dump shows the sound records before the damage (and every other partition) and names
    # the damage, rather than stopping with a traceback.
    dump = minicoord_log("dump", str(node.data_dir))
    assert dump.returncode == 1, dump.stderr  # printed what it could, and says it is damaged
    assert f"minicoord: {damaged} is damaged at byte {start} ({problem})" in dump.stderr
    assert "Traceback" not in dump.stderr
    lines = dump.stdout.splitlines()
    ours = [
        next(f for f in line.split() if f.startswith("offset="))
        for line in lines
        if f"group='{GROUP}'" in line
    ]
    hidden = 2 * len([s for s in batch_spans(damaged) if s[0] >= start])  # two records each
    assert len(ours) == 2 * 20 - hidden
    assert ours[:2] == ["offset=0", "offset=1"]
    assert len([line for line in lines if f"group='{OTHER}'" in line]) == 6
    # The healthy partition's commit made while the other was failed is durable.
    node.start()
    assert await fetch(node, OTHER) == (0, offsets(9000))
    assert await fetch(node, GROUP) == (unavailable, {})


async def test_a_record_that_does_not_replay_fails_only_its_partition(node_factory: Any) -> None:
    """Sound bytes that do not decode (a value cut short under a good CRC) fail their offsets
    partition's load, as Kafka's loader gives up on them; a record of a type this server does
    not know is skipped with a warning, as Kafka's loader skips it. Every other offsets
    partition and every topic partition loads and serves, and the server stops cleanly."""
    node: Node = node_factory({}, [(TOPIC, 2)])
    node.start()
    await commit(node, GROUP, 100)
    await commit(node, OTHER, 7000)
    node.stop()
    now = int(time.time() * 1000)
    # A ConsumerGroupMetadata record (type 3) whose value is cut short; an unknown type 99.
    for partition, record in (
        (DAMAGED_PARTITION, Record(group_epoch_key(GROUP), b"\x00\x00\x00")),
        (HEALTHY_PARTITION, Record(struct.pack(">h", 99) + b"future", b"\x00\x00")),
    ):
        plog = PartitionLog(
            log_dir(node.data_dir, OFFSETS_TOPIC, partition), str(partition), 100 * 1024 * 1024
        )
        plog.open()
        plog.append([record], now)
        plog.flush()
        plog.close()

    node.start()
    await wait_loaded(node)
    node.wait_log(f"offsets partition {DAMAGED_PARTITION} is not served: loading it failed")
    assert f"offsets partition {HEALTHY_PARTITION}: 1 records of unknown type 99 ignored" in (
        node.log
    )
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert await fetch(node, GROUP) == (unavailable, {})
    assert await fetch(node, OTHER) == (0, offsets(7000))
    await commit(node, OTHER, 9000)
    # The topic partitions, loaded after the offsets partitions, are served.
    answer = await wait_for_value(
        lambda: list_offsets(node.port, TOPIC, PARTS),
        lambda errors: ErrorCode.NOT_LEADER_OR_FOLLOWER not in errors,
        15,
        what="the topic partitions to load",
    )
    assert answer == [0, 0]
    node.stop()
    # What the loader refused, the offline check names; the skipped record it only notes.
    verify = minicoord_log("verify", str(node.data_dir))
    assert verify.returncode == 1, verify.stdout
    assert "1 problem(s) found" in verify.stderr
    damaged = segments(node.data_dir, DAMAGED_PARTITION)[-1]
    assert f"undecodable: {damaged} offset 2: " in verify.stdout  # after the two commits
    assert "unknown __consumer_offsets record type 99 (skipped at start)" in verify.stdout
