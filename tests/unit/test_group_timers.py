"""Time-driven work: session expiry, the join and sync deadlines, the new-member join timeout.

Every rebalance here fires from `advance(now)`, never from some later request.
"""

from __future__ import annotations

from helpers_coordinator import GROUP, REBALANCE_MS, SESSION_MS, Harness
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.member import NEW_MEMBER_JOIN_TIMEOUT_MS
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.server.coordinator.results import JoinOutcome, SyncOutcome


def test_session_expiry_evicts_a_silent_member_and_rebalances_the_rest(h: Harness) -> None:
    a, b, c = h.form_group(0, 3)
    for t in range(3_000, 10_000, 3_000):
        assert h.heartbeat(t, a, 1) is ErrorCode.NONE
        assert h.heartbeat(t, b, 1) is ErrorCode.NONE
        h.advance(t)
    result = h.advance(9_999)
    assert result.replies == [] and result.records == []
    assert h.member_ids() == [a, b, c]
    h.advance(SESSION_MS)  # c's last sign of life was at 0
    assert h.member_ids() == [a, b]
    assert h.state() == "PreparingRebalance"
    # The survivors learn of it from their next heartbeat and rejoin.
    assert h.heartbeat(10_001, a, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    outcomes = h.rejoin_all(10_002, [a, b])
    assert [o.generation_id for o in outcomes] == [2, 2]
    assert [m.member_id for m in outcomes[0].members] == [a, b]
    assert h.heartbeat(10_003, c, 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_expiry_fires_from_the_timer_without_any_request(h: Harness) -> None:
    (_a,) = h.form_group(0, 1)
    assert h.coordinator.next_deadline() is not None
    h.advance(SESSION_MS)
    # The only member expired: the group rebalanced to an empty generation on its own.
    assert h.state() == "Empty"
    assert h.group().generation_id == 2
    assert h.records[-1][1].value is not None  # the empty generation was persisted


def test_next_deadline_is_the_earliest_timer(h: Harness) -> None:
    assert h.coordinator.next_deadline() is None
    h.join(100, client_id="p", session_ms=7_000)  # a pending member: expires at 7100
    assert h.coordinator.next_deadline() == 7_100
    h.advance(7_100)
    assert set(h.group().pending_members) == set()
    assert h.coordinator.next_deadline() is None


def test_advance_with_nothing_due_does_nothing(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    result = h.advance(5_000)
    assert result.value is None
    assert result.replies == []
    assert result.records == []
    assert h.member_ids() == [a, b]


def test_advance_jumping_far_fires_everything_due(h: Harness) -> None:
    h.form_group(0, 3)
    h.advance(10**9)
    assert h.state() == "Empty"
    assert h.member_ids() == []
    assert h.coordinator.next_deadline() is None


def test_sync_deadline_removes_members_that_never_sync(h: Harness) -> None:
    joined = h.join_together(0, {"client_id": "a"}, {"client_id": "b"}, {"client_id": "c"})
    a, b, c = (mid for mid, _ in joined)
    tb = h.sync(1_000, b, 1)
    h.sync(2_000, a, 1, {a: b"A", b: b"B", c: b"C"})  # Stable; c never syncs
    assert h.reply(tb).assignment == b"B"
    for t in range(3_000, REBALANCE_MS, 3_000):
        for m in (a, b, c):
            assert h.heartbeat(t, m, 1) is ErrorCode.NONE
        h.advance(t)
    h.advance(REBALANCE_MS - 1)
    assert h.member_ids() == [a, b, c]
    h.advance(REBALANCE_MS)  # the rebalance timeout counted from the join's completion
    assert h.member_ids() == [a, b]
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(REBALANCE_MS + 1, c, 1) is ErrorCode.UNKNOWN_MEMBER_ID
    outcomes = h.rejoin_all(REBALANCE_MS + 2, [a, b])
    assert [o.generation_id for o in outcomes] == [2, 2]


def test_sync_deadline_when_even_the_leader_never_syncs(h: Harness) -> None:
    joined = h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    a, b = (mid for mid, _ in joined)
    tb = h.sync(100, b, 1)
    for t in range(3_000, REBALANCE_MS, 3_000):  # a stays alive but never syncs
        assert h.heartbeat(t, a, 1) is ErrorCode.NONE
        h.advance(t)
    h.advance(REBALANCE_MS - 1)
    assert not h.answered(tb)
    h.advance(REBALANCE_MS)
    # Only the leader failed to sync; b was waiting for it and is told to rejoin.
    assert h.reply(tb) == SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS)
    assert h.member_ids() == [b]
    assert h.state() == "PreparingRebalance"
    assert h.reply(h.join(REBALANCE_MS + 1, b)).leader_id == b


def test_sync_deadline_with_nobody_synced_empties_the_group(h: Harness) -> None:
    h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    h.advance(REBALANCE_MS)
    group = h.group()
    assert group.members == {}
    assert group.state.value == "Empty"
    assert group.generation_id == 2


def test_sync_deadline_is_cancelled_once_everyone_synced(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    for t in range(3_000, 3 * REBALANCE_MS, 3_000):
        h.heartbeat(t, a, 1)
        h.heartbeat(t, b, 1)
        h.advance(t)
    assert h.member_ids() == [a, b]
    assert h.group().generation_id == 1


def test_join_deadline_removes_members_that_did_not_rejoin_and_completes(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    ta = h.join(1_000, a)
    for t in range(3_000, 31_000, 3_000):
        assert h.heartbeat(t, b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    result = h.advance(31_000)
    assert [ticket for ticket, _ in result.replies] == [ta]
    assert h.reply(ta).generation_id == 2
    assert h.member_ids() == [a]


def test_new_member_parked_in_join_expires_after_the_new_member_join_timeout(
    h: Harness,
) -> None:
    # Kafka's NewMemberJoinTimeoutMs: a new member blocked in its first JoinGroup cannot
    # heartbeat, so it is kept only up to five minutes.
    assert NEW_MEMBER_JOIN_TIMEOUT_MS == 300_000
    a, b = h.form_group(0, 2, rebalance_ms=600_000)
    c, tc = h.join_new(1_000, client_id="c")  # c's rebalance timeout is 30 s, b's is 10 min
    ta = h.join(1_000, a)
    # b keeps its session but does not rejoin: the join phase lasts b's ten minutes.
    for t in range(3_000, 301_000, 3_000):
        assert h.heartbeat(t, b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
        h.advance(t)
    assert c in h.member_ids()
    h.advance(1_000 + NEW_MEMBER_JOIN_TIMEOUT_MS - 1)
    assert not h.answered(tc)
    h.advance(1_000 + NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert h.reply(tc) == JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=c)
    assert c not in h.member_ids()
    # a, parked just as long but not new, is still waiting.
    assert not h.answered(ta)
    assert a in h.member_ids()


def test_deleting_a_group_cancels_its_timers(h: Harness) -> None:
    pending = h.reply(h.join(0, client_id="p")).member_id  # the group is still Empty
    assert h.coordinator.next_deadline() == SESSION_MS
    assert h.absorb(h.coordinator.delete_groups(20, [GROUP])).value == [ErrorCode.NONE]
    assert h.coordinator.next_deadline() is None
    assert h.advance(10**9).replies == []
    assert h.reply(h.join(30, pending, client_id="p")).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_timers_of_one_group_leave_others_alone(h: Harness) -> None:
    a1 = h.form_group(0, 1, group_id="one")[0]
    a2 = h.form_group(0, 1, group_id="two")[0]
    for t in range(3_000, 30_000, 3_000):
        h.heartbeat(t, a2, 1, group_id="two")
        h.advance(t)
    assert h.member_ids("one") == []
    assert h.member_ids("two") == [a2]
    assert a1 not in h.member_ids("two")


def test_no_session_runs_out_while_the_partition_is_not_served(h: Harness) -> None:
    # An injected NOT_COORDINATOR (ctl moved): the members cannot reach their coordinator,
    # so, as in Kafka (whose unloaded partition runs no timers), none is expired for it, and
    # each gets a whole session once the partition is served again (onLoaded).
    a, b = h.form_group(0, 2)
    coordinator = h.coordinator
    partition = coordinator.partition_for(GROUP)
    coordinator.set_partition_status(partition, PartitionStatus.MOVED)
    h.advance(3 * SESSION_MS)
    assert h.member_ids() == [a, b]
    coordinator.restart_sessions(partition, 3 * SESSION_MS)
    coordinator.set_partition_status(partition, PartitionStatus.ACTIVE)
    h.advance(4 * SESSION_MS - 1)
    assert h.member_ids() == [a, b] and h.state() == "Stable"
    assert h.heartbeat(4 * SESSION_MS - 1, a, 1) is ErrorCode.NONE
    h.advance(4 * SESSION_MS)  # b was silent for the whole session it was given
    assert h.member_ids() == [a]
