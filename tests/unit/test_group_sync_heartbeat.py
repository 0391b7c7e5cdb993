"""SyncGroup, Heartbeat and LeaveGroup."""

from __future__ import annotations

import pytest
from helpers_coordinator import GROUP, SESSION_MS, Harness, assignment
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import LeaveMemberOutcome, LeaveOutcome, SyncOutcome


def completing(h: Harness, count: int = 2) -> list[str]:
    """A generation-1 group whose members have their JoinGroup answers but have not synced."""
    joined = h.join_together(0, *({"client_id": f"m{i}"} for i in range(count)))
    assert h.state() == "CompletingRebalance"
    return [mid for mid, _ in joined]


# -- SyncGroup ---------------------------------------------------------------------------------


def test_followers_wait_for_the_leaders_assignment(h: Harness) -> None:
    a, b, c = completing(h, 3)
    tb = h.sync(10, b, 1)
    tc = h.sync(20, c, 1)
    assert not h.answered(tb)
    assert not h.answered(tc)
    assert h.state() == "CompletingRebalance"
    ta = h.sync(30, a, 1, {a: b"A", b: b"B", c: b"C"})
    assert h.state() == "Stable"
    assert h.reply(ta) == SyncOutcome(ErrorCode.NONE, "consumer", "range", b"A")
    assert h.reply(tb) == SyncOutcome(ErrorCode.NONE, "consumer", "range", b"B")
    assert h.reply(tc) == SyncOutcome(ErrorCode.NONE, "consumer", "range", b"C")


def test_members_left_out_of_the_assignment_get_an_empty_one(h: Harness) -> None:
    a, b = completing(h)
    tb = h.sync(10, b, 1)
    h.sync(20, a, 1, {a: b"A", "stranger": b"?"})
    assert h.reply(tb).assignment == b""
    assert h.reply(tb).error is ErrorCode.NONE
    assert "stranger" not in h.member_ids()


def test_follower_syncing_after_the_leader_is_answered_at_once(h: Harness) -> None:
    a, b = completing(h)
    h.sync(10, a, 1, {a: b"A", b: b"B"})
    tb = h.sync(5_000, b, 1)
    assert h.reply(tb) == SyncOutcome(ErrorCode.NONE, "consumer", "range", b"B")


def test_sync_in_a_stable_group_returns_the_current_assignment(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    # Another sync, even with a different assignment, changes nothing in a Stable group.
    again = h.sync(100, a, 1, {a: b"other"})
    assert h.reply(again).assignment == assignment("t1", 0)
    assert h.reply(h.sync(100, b, 1)).assignment == assignment("t1", 1)


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name"),
    [("consumer", None), (None, "range"), ("consumer", "range")],
)
def test_sync_v5_matching_protocol_is_accepted(
    h: Harness, protocol_type: str | None, protocol_name: str | None
) -> None:
    a, _ = completing(h)
    t = h.sync(10, a, 1, {a: b"A"}, protocol_type=protocol_type, protocol_name=protocol_name)
    assert h.reply(t).error is ErrorCode.NONE


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name"),
    [("connect", None), (None, "roundrobin"), ("connect", "range"), ("consumer", "sticky")],
)
def test_sync_v5_protocol_mismatch_is_inconsistent(
    h: Harness, protocol_type: str | None, protocol_name: str | None
) -> None:
    a, _b = completing(h)
    t = h.sync(10, a, 1, {a: b"A"}, protocol_type=protocol_type, protocol_name=protocol_name)
    assert h.reply(t) == SyncOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    assert h.state() == "CompletingRebalance"


def test_sync_with_a_wrong_generation_is_illegal(h: Harness) -> None:
    a, _ = completing(h)
    for generation in (0, 2, -1):
        assert h.reply(h.sync(10, a, generation, {a: b"A"})).error is (ErrorCode.ILLEGAL_GENERATION)
    assert h.state() == "CompletingRebalance"


def test_sync_from_an_unknown_member(h: Harness) -> None:
    completing(h)
    assert h.reply(h.sync(10, "ghost", 1)) == SyncOutcome(ErrorCode.UNKNOWN_MEMBER_ID)
    assert h.reply(h.sync(10, "ghost", 1, group_id="no-group")).error is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_sync_with_an_empty_group_id_is_invalid(h: Harness) -> None:
    assert h.reply(h.sync(0, "m", 1, group_id="")).error is ErrorCode.INVALID_GROUP_ID


def test_sync_during_preparing_rebalance(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.join(100, a)
    assert h.reply(h.sync(200, b, 1)) == SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS)


def test_unknown_member_error_is_checked_before_generation(h: Harness) -> None:
    # Kafka validates the member first, then the generation.
    completing(h)
    assert h.reply(h.sync(10, "ghost", 99)).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_followers_answered_by_the_leader_get_a_fresh_session() -> None:
    # Kafka resets every member's session when it propagates the assignment: a follower that
    # waited in SyncGroup for most of a session must not be expired right after its answer.
    h = Harness()
    a, b = completing(h)
    tb = h.sync(1_000, b, 1)
    for t in range(3_000, 20_000, 3_000):
        assert h.heartbeat(t, a, 1) is ErrorCode.NONE
        h.advance(t)
    h.sync(20_000, a, 1, {a: b"A", b: b"B"})
    assert h.reply(tb).error is ErrorCode.NONE
    h.advance(29_999)
    assert h.member_ids() == [a, b]
    assert h.heartbeat(29_999, b, 1) is ErrorCode.NONE


def test_followers_told_to_rejoin_get_a_fresh_session() -> None:
    # The same reset applies when the parked SyncGroup is answered REBALANCE_IN_PROGRESS.
    h = Harness()
    a, b = completing(h)
    tb = h.sync(1_000, b, 1)
    for t in range(3_000, 9_000, 3_000):
        assert h.heartbeat(t, a, 1) is ErrorCode.NONE
    h.join_new(9_000, client_id="c")
    assert h.reply(tb) == SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS)
    assert h.heartbeat(12_000, a, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(12_000)
    assert b in h.member_ids()
    h.advance(18_999)
    assert b in h.member_ids()
    h.advance(19_000)
    assert b not in h.member_ids()


def test_resent_sync_replaces_the_parked_one(h: Harness) -> None:
    a, b = completing(h)
    first = h.sync(10, b, 1)
    second = h.sync(20, b, 1)
    assert h.reply(first).error is ErrorCode.REBALANCE_IN_PROGRESS
    h.sync(30, a, 1, {b: b"B"})
    assert h.reply(second).assignment == b"B"


# -- Heartbeat ---------------------------------------------------------------------------------


def test_heartbeat_in_each_state(h: Harness) -> None:
    a, b = completing(h)
    assert h.heartbeat(10, b, 1) is ErrorCode.NONE  # CompletingRebalance
    h.sync(20, a, 1, {})
    assert h.heartbeat(30, b, 1) is ErrorCode.NONE  # Stable
    h.join(40, a)
    assert h.heartbeat(50, b, 1) is ErrorCode.REBALANCE_IN_PROGRESS  # PreparingRebalance
    h.join(60, b)
    assert h.heartbeat(70, b, 2) is ErrorCode.NONE


def test_heartbeat_errors(h: Harness) -> None:
    a, _ = h.form_group(0, 2)
    assert h.heartbeat(10, a, 2) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(10, a, 0) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(10, "ghost", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(10, "ghost", 99) is ErrorCode.UNKNOWN_MEMBER_ID  # member checked first
    assert h.heartbeat(10, a, 1, group_id="no-group") is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(10, a, 1, group_id="") is ErrorCode.INVALID_GROUP_ID
    # A dynamic member named with an instance id the group does not know.
    assert h.heartbeat(10, a, 1, instance_id="nobody") is ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeats_keep_a_member_alive(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    for t in range(3_000, 120_000, 3_000):
        assert h.heartbeat(t, a, 1) is ErrorCode.NONE
        assert h.heartbeat(t, b, 1) is ErrorCode.NONE
        h.advance(t)
    assert h.member_ids() == [a, b]
    assert h.state() == "Stable"
    assert h.group().generation_id == 1


def test_a_heartbeat_pushes_the_session_deadline_back(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    assert h.heartbeat(9_999, b, 1) is ErrorCode.NONE
    assert h.heartbeat(9_999, a, 1) is ErrorCode.NONE
    h.advance(10_000)
    assert h.member_ids() == [a, b]
    h.advance(9_999 + SESSION_MS - 1)
    assert h.member_ids() == [a, b]
    h.advance(9_999 + SESSION_MS)
    assert h.member_ids() == []


def test_heartbeats_change_no_group_state(h: Harness) -> None:
    a, _b = h.form_group(0, 2)
    h.records.clear()
    before = len(h.delivered)
    for t in range(1, 5):
        h.heartbeat(t, a, 1)
    assert h.records == []
    assert len(h.delivered) == before
    assert h.state() == "Stable"


# -- LeaveGroup --------------------------------------------------------------------------------


def test_member_leaving_triggers_a_rebalance(h: Harness) -> None:
    a, b, c = h.form_group(0, 3)
    outcome = h.leave(100, (b, None))
    assert outcome == LeaveOutcome(ErrorCode.NONE, (LeaveMemberOutcome(b, None, ErrorCode.NONE),))
    assert h.state() == "PreparingRebalance"
    assert h.member_ids() == [a, c]
    outcomes = h.rejoin_all(200, [a, c])
    assert [o.generation_id for o in outcomes] == [2, 2]
    assert [m.member_id for m in outcomes[0].members] == [a, c]


def test_leave_answers_each_member(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    outcome = h.leave(100, (a, None), ("ghost", None), ("", None))
    assert outcome.error is ErrorCode.NONE
    assert [m.error for m in outcome.members] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert h.member_ids() == [b]


def test_leave_of_an_unknown_group(h: Harness) -> None:
    outcome = h.leave(0, ("m", None), ("", "inst"), group_id="nope")
    assert outcome == LeaveOutcome(
        ErrorCode.NONE,
        (
            LeaveMemberOutcome("m", None, ErrorCode.UNKNOWN_MEMBER_ID),
            LeaveMemberOutcome("", "inst", ErrorCode.UNKNOWN_MEMBER_ID),
        ),
    )
    assert h.leave(0, ("m", None), group_id="").error is ErrorCode.INVALID_GROUP_ID


def test_leave_while_completing_tells_parked_followers_to_rejoin(h: Harness) -> None:
    _a, b, c = completing(h, 3)
    tb = h.sync(10, b, 1)
    h.leave(20, (c, None))
    assert h.reply(tb) == SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS)
    assert h.state() == "PreparingRebalance"


def test_leave_of_a_member_parked_in_join_answers_its_join(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    ta = h.join(100, a)
    h.leave(200, (a, None))
    assert h.reply(ta).error is ErrorCode.UNKNOWN_MEMBER_ID
    # b is now the only member and has not rejoined: the group waits for it.
    assert h.state() == "PreparingRebalance"
    assert h.reply(h.join(300, b)).generation_id == 2


def test_last_members_leaving_empty_the_group(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.leave(100, (a, None), (b, None))
    group = h.group()
    assert group.state.value == "Empty"
    assert group.generation_id == 2
    assert group.leader_id is None
    assert group.protocol_name is None
    assert group.members == {}
    # Nothing is left to expire or time out.
    h.advance(10**9)
    assert h.group().generation_id == 2


def test_pending_member_leaving_a_stable_group_does_not_rebalance(h: Harness) -> None:
    # Kafka's removePendingMemberAndUpdateGroup only re-checks a join phase already under way.
    a, _b = h.form_group(0, 2)
    pending = h.reply(h.join(100, client_id="p")).member_id
    outcome = h.leave(200, (pending, None))
    assert outcome.members == (LeaveMemberOutcome(pending, None, ErrorCode.NONE),)
    assert set(h.group().pending_members) == set()
    assert h.state() == "Stable"
    assert h.group().generation_id == 1
    assert h.heartbeat(300, a, 1) is ErrorCode.NONE


def test_pending_member_leaving_completes_a_join_phase_waiting_for_it(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    ta = h.join(100, a)
    pending = h.reply(h.join(100, client_id="p")).member_id
    tb = h.join(200, b)
    assert not h.answered(tb)  # the pending member holds the phase open
    h.leave(300, (pending, None))
    assert h.reply(ta).generation_id == h.reply(tb).generation_id == 2
    assert h.member_ids() == [a, b]
    assert GROUP in h.coordinator.groups.groups


def test_each_member_expires_at_its_own_deadline_under_one_group_timer() -> None:
    # A group's members share one session timer (at the earliest deadline among them), so
    # timers do not grow with members; each member still goes exactly when its own session
    # lapses, and no sooner.
    small, large = Harness(), Harness()
    small.form_group(0, 2)
    large.form_group(0, 40)
    assert len(small.coordinator.timers) == len(large.coordinator.timers)

    h = Harness()
    a, b, c = h.form_group(0, 3)
    assert h.heartbeat(1_000, a, 1) is ErrorCode.NONE
    assert h.heartbeat(4_000, b, 1) is ErrorCode.NONE
    for t in range(3_000, 10_999, 3_000):
        h.heartbeat(t, c, 1)
    h.advance(10_999)
    assert h.member_ids() == [a, b, c]
    h.advance(11_000)
    assert h.member_ids() == [b, c]
    h.heartbeat(12_000, c, 1)
    h.advance(13_999)
    assert h.member_ids() == [b, c]
    h.advance(14_000)
    assert h.member_ids() == [c]
