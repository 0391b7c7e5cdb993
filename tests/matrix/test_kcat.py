"""kcat (Debian's package, librdkafka inside) balanced consumers against a real minicoord process.

`kcat -b BOOTSTRAP -G GROUP topic6` is librdkafka's high-level KafkaConsumer with kcat's own
rebalance callback, which prints every assignment and revocation; those lines are the
member's events. With the stock partition.assignment.strategy ("range,roundrobin") the
coordinator must pick "range", and the assignments are checked three ways: what each kcat
printed, what the coordinator holds (DescribeGroups), and what RangeAssignor must produce.

Commits: kcat auto-commits the offsets of the records it has printed, and these partitions have
no records (the server has no data path), so kcat has nothing to commit. The commit test shows
that from kcat's own debug log rather than assuming it, then proves the offsets path for the
group the other way round: offsets committed for the group are what kcat's OffsetFetch reads
back when it joins.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from matrixkit import (
    ALL,
    assert_exact_cover,
    commit_as_admin,
    committed_offsets,
    last_generation,
    leave_all,
    owned,
    range_assignment,
    wait_settled,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("kcat")]

# librdkafka's debug line (cgrp) when a revocation hands partitions back to the application.
SERVED = re.compile(
    r"Served (?P<removed>\d+) removed partition\(s\), with (?P<commits>\d+) offset\(s\) to commit"
)


def start_members(spawn: Any, group: str, n: int, **options: Any) -> list[Any]:
    return [spawn.kcat(group, client_id=f"kcat-{i}", **options) for i in range(n)]


def test_three_members_split_the_topic_and_rebalance_when_one_leaves(
    server: Any, spawn: Any, group_id: str
) -> None:
    trio = start_members(spawn, group_id, 3)
    view = wait_settled(server, group_id, trio)
    assert view.protocol == "range"
    assert_exact_cover(owned(trio))
    assert owned(trio) == range_assignment(m.member_id for m in trio)
    before = last_generation(server, group_id, 3, "range")[0]

    leaver, rest = trio[1], [trio[0], trio[2]]
    assert leaver.leave() == 0  # SIGTERM: kcat closes its consumer, which leaves the group
    assert leaver.log_lines("revoked:"), leaver.describe()

    wait_settled(server, group_id, rest)
    assert_exact_cover(owned(rest))
    assert owned(rest) == range_assignment(m.member_id for m in rest)
    wait_until(
        lambda: f"member {leaver.member_id} left" in server.log,
        10,
        what="the coordinator's log of the leave",
    )
    generation = last_generation(server, group_id, 2, "range")[0]
    assert generation > before
    for member in rest:
        kinds = [e["event"] for e in member.snapshot()]
        assert "revoked" in kinds and kinds[-1] == "assigned", member.describe()
    for member in trio:
        assert not member.log_lines("% ERROR"), member.describe()


def test_offsets_of_a_kcat_group_round_trip(server: Any, spawn: Any, group_id: str) -> None:
    # 1. Three kcat members, auto-commit on (kcat's default), debug on for the commit path.
    trio = start_members(spawn, group_id, 3, debug="cgrp,topic")
    wait_settled(server, group_id, trio)
    assert leave_all(trio) == [0, 0, 0]
    # Each member's close revoked its partitions, and its auto-commit found no stored offset for
    # any of them (no record was ever delivered): it had nothing to commit, and committed nothing.
    for member in trio:
        served = [SERVED.search(line) for line in member.log_lines("removed partition(s)")]
        assert served and all(m is not None for m in served), member.describe()
        assert sum(int(m["removed"]) for m in served if m) > 0, member.describe()
        assert all(m["commits"] == "0" for m in served if m), member.describe()
    assert committed_offsets(server.bootstrap, group_id) == dict.fromkeys(ALL)

    # 2. The group is Empty: commit its offsets as an admin tool would, and read them back.
    wanted = {p: 300 + p for p in ALL}
    commit_as_admin(server.bootstrap, group_id, wanted)
    assert committed_offsets(server.bootstrap, group_id) == wanted

    # 3. Two new kcat members read exactly those offsets for the partitions they get.
    pair = start_members(spawn, group_id, 2, debug="cgrp,topic")
    wait_settled(server, group_id, pair)
    assert owned(pair) == range_assignment(m.member_id for m in pair)
    for member in pair:
        for p in member.assignment:
            needle = f"OffsetFetchResponse: topic6 [{p}] offset {wanted[p]},"
            wait_until(
                lambda m=member, n=needle: m.log_lines(n),
                10,
                describe=member.describe,
                what=f"{member.name} to fetch the committed offset of partition {p}",
            )
    assert leave_all(pair) == [0, 0]
    # They consumed nothing, so they committed nothing over those offsets.
    assert committed_offsets(server.bootstrap, group_id) == wanted
