"""JoinGroup: the two-step join, completing the join phase, protocol vote, leaders, errors."""

from __future__ import annotations

import pytest
from helpers_coordinator import (
    GROUP,
    REBALANCE_MS,
    SESSION_MS,
    Harness,
    range_protocols,
    subscription,
)
from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.group import java_hash_map_order
from minicoord.server.coordinator.replay import PartitionReplay
from minicoord.server.coordinator.results import JoinMember, JoinOutcome, SyncOutcome

RANGE = subscription("t1")
RR = subscription("t1", user_data=b"rr")


# -- the two-step join (KIP-394) --------------------------------------------------------------


def test_first_join_without_member_id_is_answered_member_id_required(h: Harness) -> None:
    ticket = h.join(0, client_id="client")
    assert h.reply(ticket) == JoinOutcome(ErrorCode.MEMBER_ID_REQUIRED, member_id="client-1")
    group = h.group()
    assert group.state.value == "Empty"
    assert group.members == {}
    assert set(group.pending_members) == {"client-1"}
    assert h.records == []


def test_rejoin_with_the_given_id_joins(h: Harness) -> None:
    mid = h.reply(h.join(0, client_id="client")).member_id
    ticket = h.join(5, mid, client_id="client")
    assert h.reply(ticket) == JoinOutcome(
        ErrorCode.NONE,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader_id=mid,
        member_id=mid,
        members=(JoinMember(mid, None, RANGE),),
    )
    assert h.state() == "CompletingRebalance"
    assert set(h.group().pending_members) == set()
    assert h.member_ids() == [mid]


def test_old_clients_join_in_one_step(h: Harness) -> None:
    # JoinGroup v0-v3 cannot answer MEMBER_ID_REQUIRED: the member is added at once.
    ticket = h.join(0, client_id="old", require_known_member_id=False)
    outcome = h.reply(ticket)
    assert outcome.error is ErrorCode.NONE
    assert outcome.member_id == "old-1"
    assert outcome.generation_id == 1
    assert set(h.group().pending_members) == set()


def test_pending_member_expires_after_its_session_timeout(h: Harness) -> None:
    slow = h.reply(h.join(0, client_id="slow", session_ms=8_000)).member_id
    fast, fast_ticket = h.join_new(0, client_id="fast")
    # The pending member holds the join phase open.
    assert not h.answered(fast_ticket)
    assert set(h.group().pending_members) == {slow}
    h.advance(7_999)
    assert not h.answered(fast_ticket)
    h.advance(8_000)
    assert set(h.group().pending_members) == set()
    outcome = h.reply(fast_ticket)
    assert outcome.error is ErrorCode.NONE
    assert outcome.generation_id == 1
    assert outcome.members == (JoinMember(fast, None, RANGE),)
    # Too late: the id it was given is no longer known.
    late = h.join(9_000, slow, client_id="slow")
    assert h.reply(late).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_members_expire_each_at_its_own_deadline_on_one_timer(h: Harness) -> None:
    # A crowd of first JoinGroups costs the group one timer, not one per pending member;
    # each still lapses exactly at its own session timeout.
    timers = h.coordinator.timers
    before = len(timers)
    a = h.reply(h.join(0, client_id="a", session_ms=8_000)).member_id
    b = h.reply(h.join(10, client_id="b", session_ms=6_000)).member_id
    c = h.reply(h.join(20, client_id="c", session_ms=9_000)).member_id
    assert len(timers) == before + 1
    # b's deadline (6,010) is the earliest; a rejoining leaves it in place.
    h.join(30, a, client_id="a", session_ms=8_000)
    assert set(h.group().pending_members) == {b, c}
    h.advance(6_009)
    assert set(h.group().pending_members) == {b, c}
    h.advance(6_010)
    assert set(h.group().pending_members) == {c}
    h.advance(9_019)
    assert set(h.group().pending_members) == {c}
    h.advance(9_020)
    assert set(h.group().pending_members) == set()
    assert h.reply(h.join(9_021, b, client_id="b")).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_member_that_rejoins_in_time_is_not_expired(h: Harness) -> None:
    a = h.reply(h.join(0, client_id="a")).member_id
    b = h.reply(h.join(0, client_id="b")).member_id
    ta = h.join(5_000, a, client_id="a")
    tb = h.join(9_000, b, client_id="b")
    h.advance(18_000)  # past the 10 s pending deadline both ids were given at t=0
    assert h.reply(ta).generation_id == h.reply(tb).generation_id == 1
    assert h.member_ids() == [a, b]


def test_join_completes_as_soon_as_every_known_member_rejoined(h: Harness) -> None:
    a, b, c = h.form_group(0, 3)
    ta = h.join(1_000, a)  # the leader rejoining starts a rebalance
    assert h.state() == "PreparingRebalance"
    tb = h.join(1_100, b)
    assert not h.answered(ta)
    assert not h.answered(tb)
    tc = h.join(1_200, c)
    outcomes = [h.reply(t) for t in (ta, tb, tc)]
    assert [o.generation_id for o in outcomes] == [2, 2, 2]
    assert [o.member_id for o in outcomes] == [a, b, c]
    assert {o.leader_id for o in outcomes} == {a}
    assert h.state() == "CompletingRebalance"
    # Nothing is left for the rebalance timeout to do.
    h.sync_all(1_300, [a, b, c], 2)
    for t in range(3_000, 2_000 + REBALANCE_MS, 3_000):
        assert [h.heartbeat(t, m, 2) for m in (a, b, c)] == [ErrorCode.NONE] * 3
        h.advance(t)
    assert h.state() == "Stable"
    assert h.group().generation_id == 2
    assert h.member_ids() == [a, b, c]


def test_only_the_leader_gets_the_member_list(h: Harness) -> None:
    joined = h.join_together(
        0,
        {"client_id": "a", "protocols": [("range", subscription("x"))]},
        {"client_id": "b", "protocols": [("range", subscription("y"))]},
    )
    (a, ta), (b, tb) = joined
    leader, follower = h.reply(ta), h.reply(tb)
    assert leader.leader_id == follower.leader_id == a
    assert leader.members == (
        JoinMember(a, None, subscription("x")),
        JoinMember(b, None, subscription("y")),
    )
    assert follower.members == ()


def test_protocol_is_chosen_by_vote() -> None:
    h = Harness()
    both = [("range", RANGE), ("roundrobin", RR)]
    rr_first = [("roundrobin", RR), ("range", RANGE)]
    joined = h.join_together(
        0,
        {"client_id": "a", "protocols": both},
        {"client_id": "b", "protocols": rr_first},
        {"client_id": "c", "protocols": rr_first},
    )
    outcomes = [h.reply(t) for _, t in joined]
    # a votes range, b and c vote roundrobin.
    assert {o.protocol_name for o in outcomes} == {"roundrobin"}
    assert [m.metadata for m in outcomes[0].members] == [RR, RR, RR]


@pytest.mark.parametrize("first", ["cooperative-sticky", "range"])
def test_a_tied_vote_goes_as_kafkas_hash_map_orders_it(first: str) -> None:
    # A rolling change of assignors: one member lists each first. Kafka counts the votes in a
    # java.util.HashMap and takes the first maximum it iterates: "range" (bucket 9 of 16)
    # before "cooperative-sticky" (bucket 15), whichever member joined first.
    h = Harness()
    orders = {
        "cooperative-sticky": [("cooperative-sticky", RANGE), ("range", RANGE)],
        "range": [("range", RANGE), ("cooperative-sticky", RANGE)],
    }
    second = "range" if first == "cooperative-sticky" else "cooperative-sticky"
    joined = h.join_together(
        0,
        {"client_id": "a", "protocols": orders[first]},
        {"client_id": "b", "protocols": orders[second]},
    )
    assert {h.reply(t).protocol_name for _, t in joined} == {"range"}


def test_java_hash_map_order_is_javas() -> None:
    # What java.util.HashMap#keySet printed for these keys put in this order (Java 17): the
    # spread hash, a table doubled past 12 keys, insertion order within a bucket, UTF-16.
    assert java_hash_map_order(["b", "a", "c", "Aa", "BB", *"xyzwvutsrqp"]) == [
        "Aa",
        "BB",
        "a",
        "b",
        "c",
        "p",
        "q",
        "r",
        "s",
        "t",
        "u",
        "v",
        "w",
        "x",
        "y",
        "z",
    ]
    assert java_hash_map_order(["zürich", "東京", "range", "😀", "cooperative-sticky"]) == [
        "東京",
        "😀",
        "range",
        "zürich",
        "cooperative-sticky",
    ]


def test_vote_only_counts_protocols_every_member_supports() -> None:
    h = Harness()
    sticky = subscription("t1", user_data=b"sticky")
    joined = h.join_together(
        0,
        {"client_id": "a", "protocols": [("sticky", sticky), ("range", RANGE), ("roundrobin", RR)]},
        {"client_id": "b", "protocols": [("roundrobin", RR), ("range", RANGE)]},
        {"client_id": "c", "protocols": [("range", RANGE), ("roundrobin", RR)]},
    )
    # sticky is a's favourite but b and c lack it; a and c then vote range.
    assert {h.reply(t).protocol_name for _, t in joined} == {"range"}
    assert h.group().candidate_protocols() == {"range", "roundrobin"}


# -- leaders -----------------------------------------------------------------------------------


def test_leader_is_the_first_member_to_join(h: Harness) -> None:
    ids = h.form_group(0, 3)
    assert h.group().leader_id == ids[0]


def test_leader_leaving_hands_leadership_to_the_oldest_member(h: Harness) -> None:
    a, b, c = h.form_group(0, 3)
    outcome = h.leave(1_000, (a, None))
    assert [m.error for m in outcome.members] == [ErrorCode.NONE]
    assert h.group().leader_id == b
    tb, tc = h.join(1_100, b), h.join(1_200, c)
    assert h.reply(tb).leader_id == h.reply(tc).leader_id == b
    assert [m.member_id for m in h.reply(tb).members] == [b, c]
    assert h.reply(tc).members == ()
    assert h.reply(tb).generation_id == 2


def test_leader_that_does_not_rejoin_is_replaced_by_one_that_did(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    # b changes its subscription: a rebalance a (the leader) never answers, though it
    # keeps heartbeating.
    tb = h.join(1_000, b, protocols=range_protocols("t1", "t2"))
    for t in range(3_000, 31_000, 3_000):
        assert h.heartbeat(t, a, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(1_000 + REBALANCE_MS)
    outcome = h.reply(tb)
    assert outcome.error is ErrorCode.NONE
    assert outcome.generation_id == 2
    assert outcome.leader_id == b
    assert outcome.members == (JoinMember(b, None, subscription("t1", "t2")),)
    assert h.member_ids() == [b]
    assert h.heartbeat(31_001, a, 2) is ErrorCode.UNKNOWN_MEMBER_ID


# -- rebalance triggers in each state ----------------------------------------------------------


def test_stable_follower_rejoining_unchanged_gets_the_current_generation(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    outcome = h.reply(h.join(1_000, b))
    assert outcome == JoinOutcome(
        ErrorCode.NONE,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader_id=a,
        member_id=b,
        members=(),
    )
    assert h.state() == "Stable"
    assert h.heartbeat(1_001, a, 1) is ErrorCode.NONE


def test_stable_follower_rejoining_with_new_metadata_triggers_a_rebalance(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    tb = h.join(1_000, b, protocols=range_protocols("t9"))
    assert not h.answered(tb)
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(1_001, a, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    ta = h.join(1_002, a)
    assert h.reply(ta).generation_id == 2
    assert h.reply(ta).members[1] == JoinMember(b, None, subscription("t9"))


def test_stable_leader_rejoining_unchanged_triggers_a_rebalance(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    ta = h.join(1_000, a)
    assert not h.answered(ta)
    assert h.state() == "PreparingRebalance"
    tb = h.join(1_001, b)
    assert h.reply(ta).generation_id == h.reply(tb).generation_id == 2


def test_new_member_joining_a_stable_group_triggers_a_rebalance(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    c, tc = h.join_new(1_000, client_id="c")
    assert h.state() == "PreparingRebalance"
    assert not h.answered(tc)
    outcomes = h.rejoin_all(1_001, [a, b])
    assert [o.generation_id for o in outcomes] == [2, 2]
    assert h.reply(tc).generation_id == 2
    assert h.member_ids() == [a, b, c]


def test_completing_rebalance_rejoin_unchanged_repeats_the_answer(h: Harness) -> None:
    (a, ta), (b, tb) = h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    first_leader, first_follower = h.reply(ta), h.reply(tb)
    # Both answers were lost; the members ask again.
    again_leader = h.reply(h.join(100, a, client_id="a"))
    again_follower = h.reply(h.join(100, b, client_id="b"))
    assert again_leader == first_leader
    assert again_follower == first_follower
    assert again_leader.members  # the leader gets the members again
    assert h.state() == "CompletingRebalance"


def test_completing_rebalance_rejoin_changed_restarts_the_join_phase(h: Harness) -> None:
    (a, _), (b, _) = h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    parked_sync = h.sync(10, b, 1)
    assert not h.answered(parked_sync)
    tb = h.join(20, b, protocols=range_protocols("t2"))
    assert h.state() == "PreparingRebalance"
    # The follower waiting for an assignment that will never come is told to rejoin.
    assert h.reply(parked_sync) == SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS)
    ta = h.join(30, a)
    assert h.reply(ta).generation_id == h.reply(tb).generation_id == 2


def test_resent_join_replaces_the_parked_one(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    first = h.join(1_000, a)
    second = h.join(2_000, a)
    assert h.reply(first) == JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=a)
    assert not h.answered(second)
    h.join(2_001, b)
    assert h.reply(second).generation_id == 2


# -- rebalance timeout -------------------------------------------------------------------------


def test_rebalance_timeout_is_the_largest_members() -> None:
    h = Harness()
    a, b = h.stable(
        0, {"client_id": "a", "rebalance_ms": 20_000}, {"client_id": "b", "rebalance_ms": 50_000}
    )
    assert h.group().rebalance_timeout_ms == 50_000
    ta = h.join(1_000, a, rebalance_ms=20_000)
    for t in range(4_000, 51_000, 3_000):
        assert h.heartbeat(t, b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(21_000)  # a's own timeout does not end the join phase
    h.advance(50_999)
    assert not h.answered(ta)
    h.advance(51_000)
    assert h.reply(ta).generation_id == 2
    assert h.member_ids() == [a]


def test_rejoin_updates_the_members_timeouts() -> None:
    # Kafka's updateMember takes the rebalance and session timeouts of the new JoinGroup.
    h = Harness()
    a, b = h.form_group(0, 2)
    ta = h.join(1_000, a, rebalance_ms=60_000, session_ms=20_000)  # the leader: a rebalance
    assert h.group().members[a].rebalance_timeout_ms == 60_000
    assert h.group().members[a].session_timeout_ms == 20_000
    assert h.group().rebalance_timeout_ms == 60_000
    for t in range(3_000, 61_000, 3_000):
        assert h.heartbeat(t, b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(31_000)  # the old, smaller rebalance timeout
    assert not h.answered(ta)
    h.advance(61_000)
    assert h.reply(ta).generation_id == 2
    assert h.member_ids() == [a]
    # The new session timeout governs a from now on.
    h.sync(61_000, a, 2, {a: b"x"})
    h.advance(61_000 + SESSION_MS)
    assert h.member_ids() == [a]
    h.advance(61_000 + 20_000)
    assert h.member_ids() == []


def test_unchanged_follower_rejoin_keeps_its_timeouts(h: Harness) -> None:
    # Only a rejoin that updates the member (Kafka's updateMemberAndRebalance) takes them.
    _, b = h.form_group(0, 2)
    assert h.reply(h.join(1_000, b, rebalance_ms=60_000)).generation_id == 1
    assert h.group().members[b].rebalance_timeout_ms == REBALANCE_MS


def test_rebalance_timeout_removes_dynamic_members_that_did_not_rejoin(h: Harness) -> None:
    a, b, c = h.form_group(0, 3)
    ta, tb = h.join(1_000, a), h.join(1_000, b)
    for t in range(4_000, 31_000, 3_000):  # c stays alive but never rejoins
        assert h.heartbeat(t, c, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(30_999)
    assert not h.answered(ta)
    h.advance(31_000)
    outcome = h.reply(ta)
    assert outcome.generation_id == 2
    assert [m.member_id for m in outcome.members] == [a, b]
    assert h.reply(tb).generation_id == 2
    assert h.member_ids() == [a, b]
    assert h.heartbeat(31_001, c, 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_members_parked_in_join_are_not_expired(h: Harness) -> None:
    a, b = h.form_group(0, 2, rebalance_ms=100_000)
    ta = h.join(1_000, a)
    # a waits 10 session timeouts without a heartbeat; b keeps its session alive.
    for t in range(4_000, 101_000, 3_000):
        h.heartbeat(t, b, 1)
        h.advance(t)
    assert a in h.member_ids()
    assert not h.answered(ta)
    h.advance(101_000)
    assert h.reply(ta).error is ErrorCode.NONE
    assert h.member_ids() == [a]


# -- group.initial.rebalance.delay.ms --------------------------------------------------------


def test_initial_delay_holds_the_first_join_phase_open() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    a, ta = h.join_new(0, client_id="a")
    assert h.state() == "PreparingRebalance"
    h.advance(2_999)
    assert not h.answered(ta)  # every known member joined, yet the phase stays open
    b, tb = h.join_new(1_000, client_id="b")
    h.advance(3_000)  # a member arrived during the delay: extended by another delay
    assert not h.answered(ta)
    h.advance(5_999)
    assert not h.answered(tb)
    h.advance(6_000)
    assert h.reply(ta).generation_id == h.reply(tb).generation_id == 1
    assert [m.member_id for m in h.reply(ta).members] == [a, b]


def test_initial_delay_without_newcomers_ends_after_one_delay() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    _, ta = h.join_new(0, client_id="a")
    h.advance(2_999)
    assert not h.answered(ta)
    h.advance(3_000)
    assert h.reply(ta).generation_id == 1


def test_initial_delay_extensions_are_capped_by_the_rebalance_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    _, ta = h.join_new(0, client_id="a", rebalance_ms=7_000)
    h.join_new(1_000, client_id="b", rebalance_ms=7_000)
    h.advance(3_000)
    h.join_new(4_000, client_id="c", rebalance_ms=7_000)
    h.advance(6_000)
    h.join_new(6_500, client_id="d", rebalance_ms=7_000)
    h.advance(6_999)
    assert not h.answered(ta)
    h.advance(7_000)  # 3000 + 3000 + the 1000 left of a's rebalance timeout
    assert h.reply(ta).generation_id == 1
    assert len(h.reply(ta).members) == 4


def test_initial_delay_does_not_apply_to_a_non_empty_group() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    _, ta = h.join_new(0, client_id="a")
    h.advance(3_000)
    a = h.reply(ta).member_id
    h.sync(3_000, a, 1, {a: b"x"})
    again = h.join(4_000, a)  # the leader rejoins a Stable group: no delay
    assert h.reply(again).generation_id == 2


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("session_ms", [0, 5_999, 1_800_001])
def test_invalid_session_timeout(h: Harness, session_ms: int) -> None:
    outcome = h.reply(h.join(0, session_ms=session_ms))
    assert outcome == JoinOutcome(ErrorCode.INVALID_SESSION_TIMEOUT, member_id="")
    assert GROUP not in h.coordinator.groups.groups


@pytest.mark.parametrize("session_ms", [6_000, 1_800_000])
def test_session_timeout_bounds_are_inclusive(h: Harness, session_ms: int) -> None:
    assert h.reply(h.join(0, session_ms=session_ms)).error is ErrorCode.MEMBER_ID_REQUIRED


def test_session_timeout_bounds_come_from_config() -> None:
    h = Harness(group_min_session_timeout_ms=100, group_max_session_timeout_ms=200)
    assert h.reply(h.join(0, session_ms=99)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.reply(h.join(0, session_ms=201)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.reply(h.join(0, session_ms=150)).error is ErrorCode.MEMBER_ID_REQUIRED


def test_empty_group_id_is_invalid(h: Harness) -> None:
    assert h.reply(h.join(0, group_id="")).error is ErrorCode.INVALID_GROUP_ID
    assert h.coordinator.groups.groups == {}


def test_member_id_for_an_unknown_group_is_unknown(h: Harness) -> None:
    outcome = h.reply(h.join(0, "made-up", group_id="nope"))
    assert outcome == JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id="made-up")
    assert "nope" not in h.coordinator.groups.groups


def test_unknown_member_id_in_an_existing_group(h: Harness) -> None:
    h.form_group(0, 1)
    assert h.reply(h.join(10, "made-up")).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.state() == "Stable"


def test_inconsistent_protocols(h: Harness) -> None:
    a, _ = h.form_group(0, 2)
    # No protocol in common with the group.
    other = h.join(10, protocols=[("roundrobin", RR)])
    assert h.reply(other).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # Another protocol type.
    connect = h.join(10, protocol_type="connect")
    assert h.reply(connect).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # A member cannot drop every protocol the others support either.
    same = h.join(10, a, protocols=[("roundrobin", RR)])
    assert h.reply(same).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.state() == "Stable"
    assert set(h.group().pending_members) == set()


@pytest.mark.parametrize(
    ("protocol_type", "protocols"), [("", range_protocols()), ("consumer", [])]
)
def test_empty_protocol_type_or_list_is_inconsistent(
    h: Harness, protocol_type: str, protocols: list[tuple[str, bytes]]
) -> None:
    outcome = h.reply(h.join(0, protocol_type=protocol_type, protocols=protocols))
    assert outcome.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_empty_group_takes_any_protocol_type(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.leave(10, (a, None), (b, None))
    assert h.state() == "Empty"
    _, t = h.join_new(20, protocol_type="connect", protocols=[("v1", b"x")])
    assert h.reply(t).protocol_type == "connect"
    assert h.reply(t).generation_id == 3


def test_group_max_size_counts_members_not_pending_ones() -> None:
    # Kafka's acceptJoiningMember: a member told MEMBER_ID_REQUIRED is not counted until it
    # comes back, so two new ones are both told to come back while the group has room...
    h = Harness(group_max_size=2)
    (a,) = h.form_group(0, 1)
    x = h.reply(h.join(100, client_id="x"))
    y = h.reply(h.join(100, client_id="y"))
    assert (x.error, y.error) == (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.MEMBER_ID_REQUIRED)
    assert set(h.group().pending_members) == {x.member_id, y.member_id}
    # ...the first back fills the group (the join phase waits for the pending y too)...
    tx = h.join(101, x.member_id, client_id="x")
    ta = h.join(101, a)
    assert not h.answered(ta)
    # ...and the second is refused on its return, its place given up, which ends the join.
    ty = h.join(102, y.member_id, client_id="y")
    assert h.reply(ty) == JoinOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id="")
    assert not h.group().pending_members
    assert h.reply(ta).generation_id == h.reply(tx).generation_id == 2
    h.sync_all(103, [a, x.member_id], 2)
    # In a Stable group the members are counted: a newcomer is refused at once.
    assert h.reply(h.join(104, client_id="z")).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert (h.state(), h.member_ids()) == ("Stable", [a, x.member_id])


def test_group_max_size_while_preparing_counts_the_members_that_rejoined() -> None:
    # Kafka counts the members awaiting their JoinGroup answer: a new member may take the
    # place of one that has not rejoined yet, which is then refused and leaves the group.
    h = Harness(group_max_size=2)
    a, b = h.form_group(0, 2)
    ta = h.join(100, a)  # the leader's rejoin starts a rebalance
    assert h.state() == "PreparingRebalance"
    tn = h.join(100, client_id="n", require_known_member_id=False)
    tb = h.join(101, b)
    assert h.reply(tb) == JoinOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id="")
    assert b not in h.member_ids()
    # The join completes with the two that rejoined, without waiting for b.
    assert h.reply(ta).generation_id == h.reply(tn).generation_id == 2
    assert len(h.member_ids()) == 2


def test_group_max_size_is_checked_before_a_static_member_is_replaced() -> None:
    # As Kafka (acceptJoiningMember runs before the static member's replacement): a static
    # member restarting with no member id into a full group is refused, and the old one stays.
    h = Harness(group_max_size=2)
    ids = h.stable(0, {"client_id": "s", "instance_id": "i-s"}, {"client_id": "m"})
    restarted = h.join(100, client_id="s", instance_id="i-s")
    assert h.reply(restarted).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert (h.state(), h.member_ids()) == ("Stable", ids)


def test_group_max_size_in_a_stable_group() -> None:
    h = Harness(group_max_size=2)
    a, b = h.form_group(0, 2)
    assert h.reply(h.join(100, client_id="c")).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    static = h.join(100, client_id="s", instance_id="new-instance")
    assert h.reply(static).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.state() == "Stable"
    # Existing members are not counted against themselves.
    assert h.reply(h.join(100, b)).error is ErrorCode.NONE
    assert h.member_ids() == [a, b]


def test_a_loaded_group_over_group_max_size_rebalances() -> None:
    # Kafka's onLoaded: a group formed under a larger limit rebalances when its partition is
    # loaded under a smaller one, and the member over it is refused when it rejoins.
    formed = Harness()
    ids = formed.form_group(0, 3)
    partition = formed.group().partition
    replay = PartitionReplay(partition)
    for p, record in formed.records:
        assert p == partition
        replay.add(record.key, record.value)
    h = Harness(group_max_size=2)
    h.absorb(h.coordinator.finish_loading(replay, 1_000))
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(1_001, ids[1], 1) is ErrorCode.REBALANCE_IN_PROGRESS
    tickets = [h.join(1_002, mid) for mid in ids]
    assert h.reply(tickets[2]) == JoinOutcome(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id="")
    assert [h.reply(t).generation_id for t in tickets[:2]] == [2, 2]
    assert h.member_ids() == ids[:2]


def test_a_loaded_group_within_group_max_size_stays_stable() -> None:
    formed = Harness()
    ids = formed.form_group(0, 2)
    replay = PartitionReplay(formed.group().partition)
    for _, record in formed.records:
        replay.add(record.key, record.value)
    h = Harness(group_max_size=2)
    h.absorb(h.coordinator.finish_loading(replay, 1_000))
    assert h.state() == "Stable"
    assert h.heartbeat(1_001, ids[1], 1) is ErrorCode.NONE


def test_group_max_size_of_one() -> None:
    h = Harness(group_max_size=1)
    h.form_group(0, 1)
    assert h.reply(h.join(10, client_id="x", require_known_member_id=False)).error is (
        ErrorCode.GROUP_MAX_SIZE_REACHED
    )


def test_join_without_a_rebalance_timeout_uses_the_session_timeout(h: Harness) -> None:
    # JoinGroup v0 has no rebalance timeout; Kafka uses the session timeout for it.
    mid, t = h.join_new(0, session_ms=12_000, rebalance_ms=-1)
    assert h.reply(t).error is ErrorCode.NONE
    assert h.group().members[mid].rebalance_timeout_ms == 12_000
    assert h.group().rebalance_timeout_ms == 12_000


def test_member_ids_come_from_the_injected_factory() -> None:
    seen: list[str] = []

    def factory(client_id: str) -> str:
        seen.append(client_id)
        return f"{client_id}/fixed"

    coordinator = GroupCoordinator(Config(), new_member_id=factory)
    ticket = object()
    result = coordinator.join_group(
        0,
        ticket,
        group_id=GROUP,
        member_id="",
        group_instance_id=None,
        client_id="my-client",
        client_host="h",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer",
        protocols=range_protocols(),
        require_known_member_id=True,
    )
    assert result.reply_for(ticket) == JoinOutcome(
        ErrorCode.MEMBER_ID_REQUIRED, member_id="my-client/fixed"
    )
    assert result.records == []
    assert seen == ["my-client"]


def test_a_member_id_is_the_client_id_and_a_random_version_4_uuid() -> None:
    # Kafka names a member `clientId-UUID.randomUUID()`; ours are written without uuid.UUID,
    # so each is checked against what that class reads back.
    import uuid

    from minicoord.server.coordinator.classic.manager import random_member_id

    ids = [random_member_id("rdkafka-a") for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    variants = set()
    for mid in ids:
        prefix, _, text = mid.partition("-a-")
        assert prefix == "rdkafka"
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        variants.add(text[19])
    assert variants == set("89ab")  # the variant's two free values, all four drawn


def test_a_forked_child_does_not_hand_out_its_parents_next_member_ids() -> None:
    # Member ids come from a pool of random bytes; a fork copies the pool, and without
    # forgetting it the child would give its members the ids the parent gives next.
    import os

    from minicoord.server.coordinator.classic.manager import random_member_id

    random_member_id("c")  # the pool is filled and partly used
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next three ids, to the parent
        try:
            os.write(write_end, ",".join(random_member_id("c") for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child_ids = set(pipe.read().decode().split(","))
    os.waitpid(pid, 0)
    parent_ids = {random_member_id("c") for _ in range(3)}
    assert len(child_ids) == 3
    assert not child_ids & parent_ids
