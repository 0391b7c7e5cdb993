"""What was deleted stays deleted: DeleteGroups and OffsetDelete across restarts.

Deletions are tombstones in the offsets log. A group deleted with the admin client (one that
had members and so a group metadata record, and one that only stored offsets) and offsets
deleted with OffsetDelete must stay gone after a SIGKILL restart, a SIGTERM restart, and
after `minicoord log compact` (which may drop the tombstones themselves once
log.cleaner.delete.retention.ms has passed, but then also everything they deleted). What was
not deleted stays.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from durakit import Node, minicoord_log, reading, wait_for_value
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import CoordinatorLoadInProgressError, NoError

pytestmark = pytest.mark.timeout(90)

TOPIC = "deletes"
MEMBER_GROUP = "durability-deleted-members"  # had a member: group metadata + offsets
SIMPLE_GROUP = "durability-deleted-simple"  # only stored offsets
PRUNED_GROUP = "durability-pruned"  # two of its three offsets deleted
KEPT_GROUP = "durability-kept"  # untouched


async def commit(node: Node, group: str, offsets: dict[int, int]) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=node.bootstrap, group_id=group, enable_auto_commit=False
    )
    await asyncio.wait_for(consumer.start(), 20)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in offsets])
        tps = {TopicPartition(TOPIC, p): OffsetAndMetadata(o, "") for p, o in offsets.items()}
        await asyncio.wait_for(consumer.commit(tps), 20)
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


async def join_commit_leave(node: Node, group: str, offset: int) -> None:
    """A subscribed member: joins, commits its partitions, leaves (the group is Empty)."""
    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=node.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=300,
    )
    await asyncio.wait_for(consumer.start(), 20)
    try:
        await wait_for_value(
            reading(lambda: consumer.assignment()),
            lambda a: len(a) == 3,
            20,
            what="the member's assignment",
        )
        tps = {tp: OffsetAndMetadata(offset + tp.partition, "") for tp in consumer.assignment()}
        await asyncio.wait_for(consumer.commit(tps), 20)
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


def state(admin: KafkaAdminClient) -> dict[str, Any]:
    """Every group the server lists, and the offsets of the four groups of this test."""
    listed = sorted(g["group_id"] for g in admin.list_groups())
    offsets = {}
    for group in (MEMBER_GROUP, SIMPLE_GROUP, PRUNED_GROUP, KEPT_GROUP):
        got = admin.list_group_offsets(group)[group]
        offsets[group] = {tp.partition: om.offset for tp, om in got.items()}
    return {"groups": listed, "offsets": offsets}


async def admin_state(node: Node) -> dict[str, Any]:
    """`state` through the admin client, once the server has loaded every partition (the
    admin client does not retry COORDINATOR_LOAD_IN_PROGRESS itself)."""

    def run() -> dict[str, Any]:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10_000)
        try:
            deadline = time.monotonic() + 20
            for _ in range(400):
                try:
                    return state(admin)
                except CoordinatorLoadInProgressError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            raise AssertionError("still loading after 400 tries")
        finally:
            admin.close()

    return await asyncio.wait_for(asyncio.to_thread(run), 60)


EXPECTED_AFTER = {
    "groups": sorted([PRUNED_GROUP, KEPT_GROUP]),
    "offsets": {
        MEMBER_GROUP: {},
        SIMPLE_GROUP: {},
        PRUNED_GROUP: {2: 302},
        KEPT_GROUP: {0: 400, 1: 401, 2: 402},
    },
}


async def test_deleted_groups_and_offsets_stay_deleted(node_factory: Any) -> None:
    node: Node = node_factory({}, [(TOPIC, 3)])
    node.start()
    await join_commit_leave(node, MEMBER_GROUP, 100)
    await commit(node, SIMPLE_GROUP, {0: 200, 1: 201})
    await commit(node, PRUNED_GROUP, {0: 300, 1: 301, 2: 302})
    await commit(node, KEPT_GROUP, {0: 400, 1: 401, 2: 402})
    before = await admin_state(node)
    assert before["offsets"][MEMBER_GROUP] == {0: 100, 1: 101, 2: 102}
    assert set(before["groups"]) == {MEMBER_GROUP, SIMPLE_GROUP, PRUNED_GROUP, KEPT_GROUP}

    def delete() -> tuple[Any, Any]:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10_000)
        try:
            deleted = admin.delete_groups([MEMBER_GROUP, SIMPLE_GROUP])
            pruned = admin.delete_group_offsets(
                PRUNED_GROUP, [KTopicPartition(TOPIC, 0), KTopicPartition(TOPIC, 1)]
            )
            return deleted, pruned
        finally:
            admin.close()

    deleted, pruned = await asyncio.wait_for(asyncio.to_thread(delete), 60)
    assert deleted == {MEMBER_GROUP: "OK", SIMPLE_GROUP: "OK"}
    assert {tp.partition: e for tp, e in pruned.items()} == {0: NoError, 1: NoError}
    assert await admin_state(node) == EXPECTED_AFTER

    # Acknowledged deletions survive a SIGKILL (policy `write`) ...
    node.kill()
    node.start()
    assert await admin_state(node) == EXPECTED_AFTER
    # ... and a clean restart ...
    node.stop()
    node.start()
    assert await admin_state(node) == EXPECTED_AFTER
    node.stop()
    # ... and compaction that drops the tombstones themselves (retention 0).
    compact = minicoord_log(
        "compact", str(node.data_dir), "--config", "log.cleaner.delete.retention.ms=0"
    )
    assert compact.returncode == 0, compact.stderr
    dump = minicoord_log("dump", str(node.data_dir))
    assert dump.returncode == 0, dump.stderr
    assert "<tombstone>" not in dump.stdout
    assert MEMBER_GROUP not in dump.stdout and SIMPLE_GROUP not in dump.stdout
    node.start()
    assert await admin_state(node) == EXPECTED_AFTER
