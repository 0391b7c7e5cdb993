"""Errors for groups this coordinator cannot serve: offsets partitions that are loading,
failed or owned elsewhere (`set_partition_status`), and groups unloaded to Dead."""

from __future__ import annotations

import pytest
from helpers_coordinator import GROUP, Harness
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.server.coordinator.results import JoinOutcome, LeaveOutcome, SyncOutcome
from minicoord.server.coordinator.state import GroupState

PARTITION = Harness().coordinator.partition_for(GROUP)
OTHER = "other-group"

STATUS_ERRORS = [
    (PartitionStatus.LOADING, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    (PartitionStatus.FAILED, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (PartitionStatus.MOVED, ErrorCode.NOT_COORDINATOR),
]


@pytest.fixture
def busy() -> tuple[Harness, list[str]]:
    h = Harness()
    assert h.coordinator.partition_for(OTHER) != PARTITION
    ids = h.form_group(0, 2)
    h.form_group(0, 1, group_id=OTHER)
    return h, ids


@pytest.mark.parametrize(("status", "error"), STATUS_ERRORS)
def test_requests_for_an_unavailable_partition(
    busy: tuple[Harness, list[str]], status: PartitionStatus, error: ErrorCode
) -> None:
    h, (a, b) = busy
    c = h.coordinator
    c.set_partition_status(PARTITION, status)
    records_before = len(h.records)
    assert c.unavailable(GROUP) is error
    assert c.unavailable(OTHER) is None

    join = h.join(10, a)
    assert h.reply(join) == JoinOutcome(error, member_id=a)
    assert h.reply(h.join(10)) == JoinOutcome(error, member_id="")
    assert c.leave_group(10, GROUP, [(a, None)]).value == LeaveOutcome(error)
    assert h.commit(10, [OffsetCommitEntry("t", 0, 1)] * 2, generation_id=1, member_id=a) == [
        error,
        error,
    ]
    assert c.fetch_offsets(GROUP, None) == (error, [])
    assert h.absorb(c.delete_offsets(10, GROUP, [("t", 0)])).value == (error, [])
    [described] = c.describe_groups([GROUP])
    assert (described.error, described.state, described.members) == (error, "", ())
    deleted = h.absorb(c.delete_groups(10, [GROUP, OTHER])).value
    assert deleted == [error, ErrorCode.NON_EMPTY_GROUP]
    # The group itself was not touched, and nothing was written.
    assert h.state() == "Stable"
    assert h.member_ids() == [a, b]
    assert len(h.records) == records_before
    # Other groups are served as usual.
    assert h.heartbeat(10, h.member_ids(OTHER)[0], 1, group_id=OTHER) is ErrorCode.NONE


@pytest.mark.parametrize(
    ("status", "error"),
    [
        # Kafka answers a SyncGroup for a loading group REBALANCE_IN_PROGRESS: the rebalance
        # state is gone and older clients do not expect COORDINATOR_LOAD_IN_PROGRESS.
        (PartitionStatus.LOADING, ErrorCode.REBALANCE_IN_PROGRESS),
        (PartitionStatus.FAILED, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (PartitionStatus.MOVED, ErrorCode.NOT_COORDINATOR),
    ],
)
def test_sync_for_an_unavailable_partition(
    busy: tuple[Harness, list[str]], status: PartitionStatus, error: ErrorCode
) -> None:
    h, (a, _) = busy
    h.coordinator.set_partition_status(PARTITION, status)
    assert h.reply(h.sync(10, a, 1)) == SyncOutcome(error)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        # Kafka answers heartbeats for a loading group blindly.
        (PartitionStatus.LOADING, ErrorCode.NONE),
        (PartitionStatus.FAILED, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (PartitionStatus.MOVED, ErrorCode.NOT_COORDINATOR),
    ],
)
def test_heartbeat_for_an_unavailable_partition(
    busy: tuple[Harness, list[str]], status: PartitionStatus, error: ErrorCode
) -> None:
    h, (a, _) = busy
    h.coordinator.set_partition_status(PARTITION, status)
    assert h.heartbeat(10, a, 1) is error
    assert h.heartbeat(10, "ghost", 99) is error


def test_list_groups_while_a_partition_loads(busy: tuple[Harness, list[str]]) -> None:
    h, _ = busy
    c = h.coordinator
    c.set_partition_status(PARTITION, PartitionStatus.LOADING)
    assert c.list_groups() == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])


@pytest.mark.parametrize("status", [PartitionStatus.FAILED, PartitionStatus.MOVED])
def test_list_groups_leaves_out_groups_it_cannot_serve(
    busy: tuple[Harness, list[str]], status: PartitionStatus
) -> None:
    h, _ = busy
    c = h.coordinator
    c.set_partition_status(PARTITION, status)
    error, listings = c.list_groups()
    assert error is ErrorCode.NONE
    assert [g.group_id for g in listings] == [OTHER]


def test_back_to_active_serves_the_group_again(busy: tuple[Harness, list[str]]) -> None:
    h, (a, _) = busy
    c = h.coordinator
    c.set_partition_status(PARTITION, PartitionStatus.MOVED)
    assert h.heartbeat(10, a, 1) is ErrorCode.NOT_COORDINATOR
    c.set_partition_status(PARTITION, PartitionStatus.ACTIVE)
    assert c.partition_status == {}
    assert c.unavailable(GROUP) is None
    assert h.heartbeat(11, a, 1) is ErrorCode.NONE


def test_a_dead_group_answers_coordinator_not_available(busy: tuple[Harness, list[str]]) -> None:
    # A group unloaded mid-flight is Dead until it is dropped; members must rediscover the
    # coordinator. (Stable -> Dead is legal: unloading.)
    h, (a, _b) = busy
    h.group().transition(GroupState.DEAD, 10)
    assert h.reply(h.join(20, a)).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.reply(h.join(20)).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.reply(h.sync(20, a, 1)).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.heartbeat(20, a, 1) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.leave(20, (a, None)) == LeaveOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert h.commit(20, [OffsetCommitEntry("t", 0, 1)], generation_id=1, member_id=a) == [
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    ]
    assert h.coordinator.delete_offsets(20, GROUP, [("t", 0)]).value == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        [],
    )
    assert h.coordinator.delete_groups(20, [GROUP]).value == [ErrorCode.GROUP_ID_NOT_FOUND]
