"""`__consumer_offsets` keeps the partition count it was made with, across restarts whose
offsets.topic.num.partitions differs, as Kafka's coordinator takes the existing topic's count.

A group's offsets partition is `abs(javaHash(group.id)) % count`: had a restart re-mapped the
groups, a group's commits would sit in one partition while its requests went to another
(OffsetFetch "no commit" while the old one loaded; DeleteGroups' tombstones written where the
offsets are not, so a deleted group came back at the next start).
"""

from __future__ import annotations

from typing import Any

import pytest
from durakit import (
    Node,
    delete_group_error,
    offset_commit,
    offset_fetch,
    topic_partition_count,
    wait_for_value,
)
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.partitioning import partition_for
from minicoord.storage.log import OFFSETS_TOPIC

pytestmark = pytest.mark.timeout(90)

TOPIC = "counted"
MADE_WITH = 3
# Groups whose partitions differ between 3 and Kafka's default 50, so a re-mapping would show.
GROUPS = [
    g
    for g in (f"count-{n}" for n in range(200))
    if partition_for(g, MADE_WITH) != partition_for(g, 50)
][:8]
DELETED = GROUPS[0]
LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.value


async def committed_after_loading(port: int, group: str) -> dict[int, int]:
    """The group's offsets once its partition is served (bounded)."""
    error, offsets = await wait_for_value(
        lambda: offset_fetch(port, group, TOPIC, [0, 1]),
        lambda answer: answer[0] != LOAD_IN_PROGRESS,
        timeout=20,
        what=f"{group}'s partition to load",
    )
    assert error == 0, error
    return offsets


async def test_a_changed_partition_count_leaves_groups_where_they_are(node_factory: Any) -> None:
    node: Node = node_factory({"offsets.topic.num.partitions": MADE_WITH}, [(TOPIC, 2)])
    node.start()
    expected = {g: {0: 10 + i, 1: 100 + i} for i, g in enumerate(GROUPS)}
    for group, offsets in expected.items():
        assert await offset_commit(node.port, group, TOPIC, offsets) == [0, 0]
    node.stop()

    node.configs = {}  # Kafka's default, 50
    node.start()
    node.wait_log(f"offsets.topic.num.partitions is 50 but {OFFSETS_TOPIC} was made with 3")
    for group, offsets in expected.items():
        # The first answer after loading is the commit, never "no commit" (-1).
        assert await committed_after_loading(node.port, group) == offsets
    assert await topic_partition_count(node.port, OFFSETS_TOPIC) == MADE_WITH
    assert await delete_group_error(node.port, DELETED) == 0
    node.stop()

    node.configs = {"offsets.topic.num.partitions": 2}  # fewer than it has: kept, not refused
    node.start()
    assert await committed_after_loading(node.port, DELETED) == {0: -1, 1: -1}
    for group in GROUPS[1:]:
        assert await committed_after_loading(node.port, group) == expected[group]
    assert await topic_partition_count(node.port, OFFSETS_TOPIC) == MADE_WITH
    node.stop()
