"""Static membership (KIP-345): group.instance.id keeps a member's slot across restarts."""

from __future__ import annotations

from helpers_coordinator import GROUP, Harness, assignment, range_protocols, subscription
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.results import (
    JoinMember,
    JoinOutcome,
    LeaveMemberOutcome,
    SyncOutcome,
)

RANGE = subscription("t1")


def static_follower_group(h: Harness, **static: object) -> tuple[str, str, str]:
    """m0 (leader), static s1 (instance i1), m2: Stable generation 1."""
    m0, s1, m2 = h.stable(
        0,
        {"client_id": "m0"},
        {"client_id": "s1", "instance_id": "i1", **static},
        {"client_id": "m2"},
    )
    return m0, s1, m2


def test_static_member_skips_member_id_required(h: Harness) -> None:
    ticket = h.join(0, instance_id="i1", client_id="s")
    outcome = h.reply(ticket)
    assert outcome.error is ErrorCode.NONE
    assert outcome.member_id == "s-1"
    assert outcome.members == (JoinMember("s-1", "i1", RANGE),)
    assert h.group().static_member_id("i1") == "s-1"
    assert set(h.group().pending_members) == set()


def test_restart_within_the_session_timeout_takes_the_old_slot_without_rebalance(
    h: Harness,
) -> None:
    m0, s1, m2 = static_follower_group(h)
    h.records.clear()
    t = h.join(5_000, instance_id="i1", client_id="s1")  # a new process: no member id
    outcome = h.reply(t)
    new = outcome.member_id
    assert new != s1
    assert outcome == JoinOutcome(
        ErrorCode.NONE,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader_id=m0,
        member_id=new,
        members=(),
    )
    group = h.group()
    assert group.state.value == "Stable"
    assert group.generation_id == 1
    assert set(group.members) == {m0, new, m2}
    assert group.static_member_id("i1") == new
    # Its old assignment, straight away.
    assert h.reply(h.sync(5_001, new, 1, instance_id="i1")) == SyncOutcome(
        ErrorCode.NONE, "consumer", "range", assignment("t1", 1)
    )
    # The others never see a rebalance.
    assert h.heartbeat(5_002, m0, 1) is ErrorCode.NONE
    assert h.heartbeat(5_002, m2, 1) is ErrorCode.NONE
    assert h.heartbeat(5_002, new, 1, instance_id="i1") is ErrorCode.NONE
    assert len(h.records) == 1  # the new member id is persisted


def test_the_replaced_member_id_is_fenced(h: Harness) -> None:
    _m0, s1, _m2 = static_follower_group(h)
    new = h.reply(h.join(5_000, instance_id="i1", client_id="s1")).member_id
    assert h.heartbeat(5_001, s1, 1, instance_id="i1") is ErrorCode.FENCED_INSTANCE_ID
    assert h.reply(h.sync(5_001, s1, 1, instance_id="i1")).error is ErrorCode.FENCED_INSTANCE_ID
    stale_join = h.join(5_001, s1, instance_id="i1", client_id="s1")
    assert h.reply(stale_join) == JoinOutcome(ErrorCode.FENCED_INSTANCE_ID, member_id=s1)
    commit = h.commit(
        5_001, [OffsetCommitEntry("t1", 1, 10)], generation_id=1, member_id=s1, instance_id="i1"
    )
    assert commit == [ErrorCode.FENCED_INSTANCE_ID]
    fenced_leave = h.leave(5_001, (s1, "i1"))
    assert fenced_leave.members == (LeaveMemberOutcome(s1, "i1", ErrorCode.FENCED_INSTANCE_ID),)
    # Without its instance id the old id is simply unknown.
    assert h.heartbeat(5_001, s1, 1) is ErrorCode.UNKNOWN_MEMBER_ID
    # None of this disturbed the group.
    assert h.state() == "Stable"
    assert h.group().static_member_id("i1") == new


def test_restarted_static_leader_is_not_told_to_assign(h: Harness) -> None:
    s0, _m1 = h.stable(0, {"client_id": "s0", "instance_id": "i0"}, {"client_id": "m1"})
    outcome = h.reply(h.join(5_000, instance_id="i0", client_id="s0"))
    new = outcome.member_id
    # The old leader id comes back, so the new process does not think it leads.
    assert outcome.leader_id == s0
    assert outcome.members == ()
    assert outcome.skip_assignment is False
    assert h.group().leader_id == new
    assert h.state() == "Stable"


def test_restarted_static_leader_with_skip_assignment(h: Harness) -> None:
    # JoinGroup v9+ (KIP-814): the leader learns it leads but must not run the assignor.
    _s0, m1 = h.stable(0, {"client_id": "s0", "instance_id": "i0"}, {"client_id": "m1"})
    outcome = h.reply(h.join(5_000, instance_id="i0", client_id="s0", skip_assignment=True))
    new = outcome.member_id
    assert outcome.error is ErrorCode.NONE
    assert outcome.leader_id == new
    assert outcome.skip_assignment is True
    assert {m.member_id for m in outcome.members} == {new, m1}
    assert h.state() == "Stable"
    assert h.group().generation_id == 1


def test_restarted_static_follower_with_skip_assignment_is_a_plain_follower(h: Harness) -> None:
    m0, _s1, _m2 = static_follower_group(h)
    outcome = h.reply(h.join(5_000, instance_id="i1", client_id="s1", skip_assignment=True))
    assert outcome.leader_id == m0
    assert outcome.members == ()
    assert outcome.skip_assignment is False


def test_restart_that_changes_the_chosen_protocol_rebalances(h: Harness) -> None:
    rr = subscription("t1", user_data=b"rr")
    both = [("range", RANGE), ("roundrobin", rr)]
    rr_first = [("roundrobin", rr), ("range", RANGE)]
    m0, _s1, m2 = h.stable(
        0,
        {"client_id": "m0", "protocols": both},
        {"client_id": "s1", "instance_id": "i1", "protocols": both},
        {"client_id": "m2", "protocols": rr_first},
    )
    assert h.group().protocol_name == "range"
    t = h.join(5_000, instance_id="i1", client_id="s1", protocols=rr_first)
    assert not h.answered(t)
    assert h.state() == "PreparingRebalance"
    t0 = h.join(5_001, m0, protocols=both)
    t2 = h.join(5_001, m2, protocols=rr_first)
    outcomes = [h.reply(t0), h.reply(t2), h.reply(t)]
    assert {o.protocol_name for o in outcomes} == {"roundrobin"}
    assert h.reply(t).generation_id == 2


def test_restart_during_completing_rebalance_rebalances(h: Harness) -> None:
    joined = h.join_together(
        0, {"client_id": "m0"}, {"client_id": "s1", "instance_id": "i1"}, {"client_id": "m2"}
    )
    (m0, _), (s1, _), (m2, _) = joined
    parked = h.sync(10, m2, 1)
    t = h.join(20, instance_id="i1", client_id="s1")
    assert not h.answered(t)
    assert h.state() == "PreparingRebalance"
    assert h.reply(parked).error is ErrorCode.REBALANCE_IN_PROGRESS
    outcomes = h.rejoin_all(30, [m0, m2])
    new = h.reply(t).member_id
    assert new != s1
    assert [o.generation_id for o in outcomes] == [2, 2]
    assert [m.member_id for m in outcomes[0].members] == [m0, m2, new]


def test_restart_while_the_old_process_is_parked_in_join_fences_it(h: Harness) -> None:
    m0, s1, m2 = static_follower_group(h)
    h.join(1_000, m0)
    old = h.join(1_001, s1, instance_id="i1", client_id="s1")
    assert not h.answered(old)
    new_ticket = h.join(1_002, instance_id="i1", client_id="s1")
    assert h.reply(old) == JoinOutcome(ErrorCode.FENCED_INSTANCE_ID, member_id=s1)
    assert not h.answered(new_ticket)
    h.join(1_003, m2)
    outcome = h.reply(new_ticket)
    assert outcome.generation_id == 2
    assert outcome.member_id == h.group().static_member_id("i1") != s1


def test_static_members_outlast_the_rebalance_timeout(h: Harness) -> None:
    m0, s1, m2 = static_follower_group(h, session_ms=120_000)
    t0, t2 = h.join(1_000, m0), h.join(1_000, m2)
    h.advance(30_999)
    assert not h.answered(t0)
    h.advance(31_000)
    # The static member did not rejoin but keeps its slot in the new generation.
    leader = h.reply(t0)
    assert leader.generation_id == 2
    assert [m.member_id for m in leader.members] == [m0, s1, m2]
    assert leader.members[1] == JoinMember(s1, "i1", RANGE)
    assert h.reply(t2).generation_id == 2
    # It still has to sync generation 2 within the rebalance timeout, like any member.
    h.sync_all(31_000, [m0, m2], 2)
    for t in range(34_000, 61_000, 3_000):
        h.heartbeat(t, m0, 2)
        h.heartbeat(t, m2, 2)
        h.advance(t)
    assert s1 in h.member_ids()
    h.advance(61_000)
    assert s1 not in h.member_ids()
    assert h.state() == "PreparingRebalance"


def test_only_static_members_left_unjoined_get_another_round(h: Harness) -> None:
    # Nobody rejoined, and nobody can be removed: Kafka waits another rebalance timeout
    # instead of forming a generation without a leader.
    (s0, _t0), (m1, _t1) = h.join_together(
        0, {"client_id": "s0", "instance_id": "i0", "session_ms": 200_000}, {"client_id": "m1"}
    )
    h.sync_all(0, [s0, m1], 1)
    h.leave(1_000, (m1, None))  # Stable -> PreparingRebalance, s0 must rejoin
    assert h.state() == "PreparingRebalance"
    h.advance(31_000)
    assert h.state() == "PreparingRebalance"
    assert h.member_ids() == [s0]
    assert h.group().generation_id == 1
    rejoin = h.join(40_000, s0, instance_id="i0", client_id="s0")
    assert h.reply(rejoin).generation_id == 2


def test_silent_static_member_is_expired_after_its_session(h: Harness) -> None:
    m0, s1, m2 = static_follower_group(h, session_ms=20_000)
    for t in range(3_000, 20_000, 3_000):
        h.heartbeat(t, m0, 1)
        h.heartbeat(t, m2, 1)
        h.advance(t)
    h.advance(19_999)
    assert s1 in h.member_ids()
    h.advance(20_000)
    assert s1 not in h.member_ids()
    assert h.group().static_member_id("i1") is None
    assert h.state() == "PreparingRebalance"
    # Back after its session: a brand-new member in a new generation.
    t = h.join(21_000, instance_id="i1", client_id="s1")
    h.rejoin_all(21_000, [m0, m2])
    assert h.reply(t).generation_id == 2


def test_static_member_leaves_by_instance_id(h: Harness) -> None:
    m0, _s1, m2 = static_follower_group(h)
    outcome = h.leave(100, ("", "i1"), ("", "unknown-instance"))
    assert outcome.members == (
        LeaveMemberOutcome("", "i1", ErrorCode.NONE),
        LeaveMemberOutcome("", "unknown-instance", ErrorCode.UNKNOWN_MEMBER_ID),
    )
    assert h.member_ids() == [m0, m2]
    assert h.group().static_member_id("i1") is None
    assert h.state() == "PreparingRebalance"


def test_static_member_leaves_with_both_ids(h: Harness) -> None:
    _m0, s1, _m2 = static_follower_group(h)
    assert h.leave(100, (s1, "i1")).members[0].error is ErrorCode.NONE
    assert s1 not in h.member_ids()


def test_static_rejoin_with_its_member_id_in_a_stable_group(h: Harness) -> None:
    _m0, s1, m2 = static_follower_group(h)
    outcome = h.reply(h.join(100, s1, instance_id="i1", client_id="s1"))
    assert outcome.error is ErrorCode.NONE
    assert outcome.generation_id == 1
    assert outcome.member_id == s1
    assert h.state() == "Stable"
    # With an instance id the group does not know, it is told to forget its member id.
    unknown = h.join(100, m2, instance_id="never-seen", client_id="m2")
    assert h.reply(unknown).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_changing_subscription_on_rejoin(h: Harness) -> None:
    m0, s1, m2 = static_follower_group(h)
    t = h.join(100, s1, instance_id="i1", client_id="s1", protocols=range_protocols("t1", "t2"))
    assert not h.answered(t)
    assert h.state() == "PreparingRebalance"
    h.rejoin_all(200, [m0, m2])
    assert h.reply(t).generation_id == 2
    assert h.group().members[s1].metadata("range") == subscription("t1", "t2")
    assert GROUP in h.coordinator.groups.groups
