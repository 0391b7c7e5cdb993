"""KIP-848 consumer groups, rule by rule, on an injected clock: validation errors, epochs and
targets, reconciliation that revokes before it assigns, static members, timeouts, regexes."""

from __future__ import annotations

from consumer_helpers import GROUP, Harness
from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer.group import MemberState
from minicoord.server.coordinator.consumer.requests import HeartbeatRequest
from minicoord.server.coordinator.partition_status import PartitionStatus

E = ErrorCode


def error_of(h: Harness, request: HeartbeatRequest, version: int = 1) -> tuple[ErrorCode, str]:
    out = h.coordinator.consumer_group_heartbeat(h.now, request, version, "c", "/h").value
    return out.error, out.message or ""


def test_static_validation_answers_kafkas_errors_and_writes_nothing() -> None:
    h = Harness()
    base = {"group_id": GROUP, "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1000,
            "topics": ("foo",), "owned": {}}  # fmt: skip
    cases = [
        ({"member_id": ""}, 1, E.INVALID_REQUEST, "MemberId can't be empty."),
        ({"group_id": " "}, 1, E.INVALID_REQUEST, "GroupId can't be empty."),
        ({"instance_id": ""}, 1, E.INVALID_REQUEST, "InstanceId can't be empty."),
        ({"rebalance_timeout_ms": -1}, 1, E.INVALID_REQUEST, "RebalanceTimeoutMs must be"),
        ({"owned": None}, 1, E.INVALID_REQUEST, "TopicPartitions must be empty"),
        ({"topics": None}, 1, E.INVALID_REQUEST, "Either SubscribedTopicNames"),
        ({"member_epoch": -2}, 1, E.INVALID_REQUEST, "InstanceId can't be null."),
        ({"member_epoch": -3}, 1, E.INVALID_REQUEST, "MemberEpoch is invalid."),
        ({"server_assignor": "sticky"}, 1, E.UNSUPPORTED_ASSIGNOR, "Supported assignors"),
        ({"member_epoch": 5}, 1, E.GROUP_ID_NOT_FOUND, "not found"),
        ({"regex": "(?<=x)"}, 1, E.INVALID_REGULAR_EXPRESSION, "not a valid regular expression"),
    ]
    for change, version, error, message in cases:
        got, text = error_of(h, HeartbeatRequest(**{**base, **change}), version)
        assert (got, message in text) == (error, True), (change, got, text)
    assert h.records == [] and GROUP not in h.coordinator.groups.groups
    # v0 lets the coordinator make the member id.
    out = h.coordinator.consumer_group_heartbeat(
        h.now, HeartbeatRequest(**{**base, "member_id": ""}), 0, "c", "/h"
    ).value
    assert out.error is E.NONE and out.member_id and "-" not in out.member_id[:1]


def test_a_first_member_gets_everything_and_a_second_reconciles_through_revocation() -> None:
    h = Harness(foo=6)
    first = h.hb("a", 0)
    assert (first.member_epoch, h.owned(first)) == (1, {"foo": [0, 1, 2, 3, 4, 5]})
    assert first.heartbeat_interval_ms == 500
    second = h.hb("b", 0)
    # Every partition of b's target is still a's: b moves to epoch 2 owning nothing yet.
    assert (second.member_epoch, h.owned(second)) == (2, {})
    assert h.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state.value == "Reconciling"
    # a must give up three partitions first: it keeps epoch 1 and is given what it keeps.
    a = h.hb("a", 1)
    kept = h.owned(a)["foo"]
    assert a.member_epoch == 1 and len(kept) == 3
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # Described as Kafka describes it: a's assignment is what it keeps, without the three it
    # has still to revoke; b's is empty, its target the other three.
    (described,) = h.coordinator.consumer_group_describe([GROUP])
    by_id = {m.member_id: m for m in described.members}
    foo = h.tid("foo")
    assert by_id["a"].assignment == by_id["a"].target == ((foo, "foo", tuple(sorted(kept))),)
    others = tuple(sorted(set(range(6)) - set(kept)))
    assert (by_id["b"].assignment, by_id["b"].target) == ((), ((foo, "foo", others),))
    # Still owning them (it lists all six): nothing moves.
    assert h.hb("a", 1, owned={"foo": [0, 1, 2, 3, 4, 5]}).member_epoch == 1
    assert h.hb("b", 2, owned={}).assignment is None  # b still waits, nothing changed
    # a reports the revoked ones gone: it reaches epoch 2, with no Assignment (unchanged).
    a = h.hb("a", 1, owned={"foo": kept})
    assert (a.member_epoch, a.assignment) == (2, None)
    # b now gets the released partitions on its next heartbeat.
    b = h.hb("b", 2, owned={})
    assert sorted(h.owned(b)["foo"]) == sorted(set(range(6)) - set(kept))
    assert h.group().state.value == "Stable"


def test_epoch_checks_fence_zombies_but_tolerate_a_lost_answer() -> None:
    h = Harness(foo=4)
    h.join_all(["a"])
    member = h.group().members["a"]
    assert h.hb("a", member.epoch + 1).error is E.FENCED_MEMBER_EPOCH
    h.hb("b", 0)
    a = h.hb("a", member.epoch, owned={"foo": [0, 1, 2, 3]})
    kept = h.owned(a)["foo"]
    a2 = h.hb("a", member.epoch, owned={"foo": kept})
    new_epoch = a2.member_epoch
    assert new_epoch == member.epoch + 1
    # The answer moving a to new_epoch was lost: a retries at the previous epoch listing a
    # subset of what it owns: accepted. Without its partitions listed: fenced.
    assert h.hb("a", member.epoch, owned={"foo": kept}).error is E.NONE
    assert h.hb("a", member.epoch).error is E.FENCED_MEMBER_EPOCH
    assert h.hb("ghost", 3).error is E.UNKNOWN_MEMBER_ID


def test_leaving_frees_partitions_and_the_rest_take_them() -> None:
    h = Harness(foo=6)
    state = h.join_all(["a", "b", "c"])
    epoch = h.group().epoch
    out = h.hb("b", -1)
    assert (out.error, out.member_epoch) == (E.NONE, -1)
    assert h.group().epoch == epoch + 1 and "b" not in h.group().members
    for m in ("a", "c"):
        e, owned = state[m]
        out = h.hb(m, e, owned=owned)
        assert out.member_epoch == epoch + 1
    assert sum(len(v) for m in ("a", "c") for v in h.group().members[m].assigned.values()) == 6


def test_a_static_member_leaves_for_now_and_returns_with_no_change_for_others() -> None:
    h = Harness(foo=6)
    for m, inst in (("a", "i-a"), ("b", "i-b")):
        h.hb(m, 0, instance=inst)
    for _ in range(4):
        for m, inst in (("a", "i-a"), ("b", "i-b")):
            member = h.group().members.get(m)
            owned = {"foo": sorted(p for ps in member.assigned.values() for p in ps)}
            h.hb(m, member.epoch, owned=owned, instance=inst)
    assert h.group().state.value == "Stable"
    epoch = h.group().epoch
    held = h.group().members["b"].assigned
    out = h.hb("b", -2, instance="i-b")
    assert (out.error, out.member_epoch) == (E.NONE, -2)
    assert h.group().epoch == epoch  # no bump: its partitions wait for it
    # Another process claiming the instance while a consumer member holds it: refused.
    assert h.hb("a2", 0, instance="i-a").error is E.UNRELEASED_INSTANCE_ID
    back = h.hb("b2", 0, instance="i-b")
    assert back.error is E.NONE and back.member_epoch == epoch
    assert h.group().members["b2"].assigned == held and "b" not in h.group().members
    assert h.group().epoch == epoch
    assert h.hb("b", 3, instance="i-b").error is E.FENCED_INSTANCE_ID


def test_sessions_and_revocations_time_out_on_the_clock() -> None:
    h = Harness(
        Config(group_consumer_session_timeout_ms=10_000, group_consumer_assignment_interval_ms=0),
        foo=4,
    )
    h.join_all(["a", "b"])
    h.tick(5_000)
    h.hb("a", h.group().members["a"].epoch)
    h.tick(5_001)  # b's session (10 s) is over; a heartbeated 5 s ago
    assert set(h.group().members) == {"a"}
    a = h.group().members["a"]
    owned = {"foo": sorted(p for ps in a.assigned.values() for p in ps)}
    a_out = h.hb("a", a.epoch, owned=owned)  # a takes b's partitions: all four
    assert h.owned(a_out) == {"foo": [0, 1, 2, 3]}
    # A member that never acknowledges its revocation is fenced after its rebalance timeout.
    h.hb("c", 0)
    a = h.group().members["a"]
    h.hb("a", a.epoch)  # told to revoke, does not
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.tick(30_001)
    assert "a" not in h.group().members


def test_subscription_changes_bump_the_epoch_and_regexes_resolve_with_re2() -> None:
    h = Harness(foo=2, bar=2, baz=1)
    h.join_all(["a"])
    epoch = h.group().epoch
    member = h.group().members["a"]
    out = h.hb("a", member.epoch, topics=["foo", "bar"])
    assert out.member_epoch == epoch + 1
    out = h.hb("r", 0, topics=[], regex="ba.*")
    assert out.error is E.NONE
    assert h.group().regexes["ba.*"].topics == {"bar", "baz"}
    # A topic created later that matches joins the subscription (an epoch bump).
    h.topic("bax", 3)
    before = h.group().epoch
    h.hb("r", h.group().members["r"].epoch)
    assert "bax" in h.group().regexes["ba.*"].topics and h.group().epoch == before + 1


def test_a_regex_resolves_to_the_topics_the_resolving_member_may_describe() -> None:
    # Kafka's filterTopicDescribeAuthorizedTopics, with the principal of the heartbeat that
    # resolves the regex: at its first resolution and when topics appear later.
    h = Harness(bar=2, baz=1)

    def may(name: str) -> bool:
        return "z" not in name

    h.hb("r", 0, topics=[], regex="ba.*", describable=may)
    assert h.group().regexes["ba.*"].topics == {"bar"}
    h.topic("bay", 1)
    h.topic("baz2", 1)
    h.hb("r", h.group().members["r"].epoch, describable=may)
    assert h.group().regexes["ba.*"].topics == {"bar", "bay"}
    # The ACLs change (CreateAcls, DeleteAcls): the next heartbeat resolves it again.
    h.hb("r", h.group().members["r"].epoch, describable=lambda name: True)
    assert h.group().regexes["ba.*"].topics == {"bar", "bay"}
    h.coordinator.on_acls_changed()
    before = h.group().epoch
    h.hb("r", h.group().members["r"].epoch, describable=lambda name: True)
    assert h.group().regexes["ba.*"].topics == {"bar", "bay", "baz", "baz2"}
    assert h.group().epoch == before + 1


def test_new_partitions_of_a_subscribed_topic_bump_the_epoch_and_get_assigned() -> None:
    h = Harness(foo=4)
    state = h.join_all(["a", "b"])
    before = h.group().epoch
    topic = h.registry.get("foo")
    assert topic is not None
    h.registry.add_partitions(topic, 6)
    h.coordinator.on_topics_changed({"foo"}, created=False)
    epoch, owned = state["a"]
    out = h.hb("a", epoch, owned=owned)
    # The metadata hash changed: one bump, and the target covers the new partitions.
    assert h.group().epoch == before + 1 and out.member_epoch == before + 1
    tid = h.tid("foo")
    covered = sorted(p for t in h.group().target.values() for p in t.get(tid, ()))
    assert covered == list(range(6))
    # An unrelated topic's change does not bump it.
    h.topic("other", 2)
    h.hb("a", out.member_epoch, owned=h.owned(out) if out.assignment else owned)
    assert h.group().epoch == before + 1


def test_range_is_chosen_by_the_members_and_gives_runs() -> None:
    h = Harness(foo=6)
    h.hb("a", 0, assignor="range")
    h.hb("b", 0, assignor="range")
    targets = h.group().target
    tid = h.tid("foo")
    assert targets["a"][tid] == frozenset({0, 1, 2}) and targets["b"][tid] == frozenset({3, 4, 5})


def test_group_size_limit() -> None:
    h = Harness(Config(group_consumer_max_size=1), foo=2)
    h.hb("a", 0)
    assert h.hb("b", 0).error is E.GROUP_MAX_SIZE_REACHED


def test_offsets_of_a_consumer_group_need_the_member_epoch() -> None:
    from minicoord.server.coordinator.offset_requests import OffsetCommitEntry

    h = Harness(foo=2)
    h.join_all(["a"])
    epoch = h.group().members["a"].epoch
    entry = [OffsetCommitEntry("foo", 0, 10)]
    commit = h.coordinator.commit_offsets
    assert h.absorb(commit(h.now, GROUP, epoch, "a", None, entry, 9)) == [E.NONE]
    assert h.absorb(commit(h.now, GROUP, epoch - 1, "a", None, entry, 9)) == [E.STALE_MEMBER_EPOCH]
    assert h.absorb(commit(h.now, GROUP, epoch, "nobody", None, entry, 9)) == [E.UNKNOWN_MEMBER_ID]
    assert h.absorb(commit(h.now, GROUP, epoch, "a", None, entry, 8)) == [E.UNSUPPORTED_VERSION]
    # An admin commit (no member) is only for an empty group.
    assert h.absorb(commit(h.now, GROUP, -1, "", None, entry, 9)) == [E.UNKNOWN_MEMBER_ID]
    fetch = h.coordinator.fetch_offsets
    assert fetch(GROUP, [("foo", 0)], "a", epoch)[0] is E.NONE
    assert fetch(GROUP, [("foo", 0)], "a", epoch + 1)[0] is E.STALE_MEMBER_EPOCH
    assert fetch(GROUP, [("foo", 0)], None, -1)[1][0][1].offset == 10
    # A consumer group is not described by DescribeGroups, and is listed as "consumer".
    (described,) = h.coordinator.describe_groups([GROUP])
    assert (described.error, described.state) == (E.GROUP_ID_NOT_FOUND, "Dead")
    error, listed = h.coordinator.list_groups(types={"consumer"})
    assert error == E.NONE
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [(GROUP, "consumer", "Stable")]
    assert h.absorb(h.coordinator.delete_groups(h.now, [GROUP])) == [E.NON_EMPTY_GROUP]
    h.hb("a", -1)
    assert h.absorb(h.coordinator.delete_groups(h.now, [GROUP])) == [E.NONE]
    assert GROUP not in h.coordinator.groups.groups


def test_the_steady_shortcut_answers_as_the_general_path_and_only_when_it_may() -> None:
    # The handler asks steady_consumer_heartbeat first for a heartbeat that says nothing new;
    # whatever it answers must be what consumer_group_heartbeat answers, and None otherwise.
    h = Harness(foo=4)
    h.join_all(["a", "b"])
    epoch = h.group().members["a"].epoch

    def shortcut(member: str, member_epoch: int, client: str = "client-a") -> object:
        return h.coordinator.steady_consumer_heartbeat(
            h.now, GROUP, member, member_epoch, None, client, "/127.0.0.1"
        )

    fast = shortcut("a", epoch)
    assert fast is not None
    assert fast == h.hb("a", epoch)
    session = h.group().members["a"].last_seen
    h.tick(1_000)
    shortcut("a", epoch)
    assert h.group().members["a"].last_seen > session  # the session moved on
    assert shortcut("nobody", epoch) is None
    assert shortcut("a", epoch + 1) is None  # the general path fences it
    assert shortcut("a", 0) is None  # a rejoin
    assert shortcut("a", epoch, client="other-client") is None  # metadata to record
    assert h.coordinator.steady_consumer_heartbeat(
        h.now, "other-group", "a", epoch, None, "client-a", "/127.0.0.1"
    ) is None  # fmt: skip
    h.hb("c", 0)  # a newcomer: the group reconciles, so nothing is steady for now
    assert shortcut("a", epoch) is None


def test_a_group_times_its_sessions_with_one_timer_and_each_member_expires_on_time() -> None:
    # Sessions of 10 s; members last heard from at different times each go exactly when
    # their own 10 s have passed, though the group holds one session timer, not one each.
    h = Harness(foo=4)
    h.join_all(["a", "b", "c"])
    timers = h.coordinator.timers
    sessions = [k for k in timers._live if isinstance(k, tuple) and "session" in k[0]]
    assert sessions == [("cg-sessions", GROUP)]
    h.tick(3_000)
    h.hb("b", h.group().members["b"].epoch)
    h.tick(3_000)
    h.hb("c", h.group().members["c"].epoch)
    last = {m.member_id: m.last_seen for m in h.group().members.values()}
    # Just before a's 10 s, everyone is still there; a goes at its deadline, b and c at theirs.
    for member, gone_before in (("a", set()), ("b", {"a"}), ("c", {"a", "b"})):
        h.tick(last[member] + 10_000 - 1 - h.now)
        assert set(h.group().members) >= {"a", "b", "c"} - gone_before
        assert member in h.group().members
        h.tick(1)
        assert member not in h.group().members
    assert len([k for k in timers._live if isinstance(k, tuple) and "session" in k[0]]) <= 1


def test_no_session_runs_out_while_the_partition_is_not_served() -> None:
    # As for classic groups (test_group_timers): an injected NOT_COORDINATOR or load fences
    # nobody, and each member gets a whole session once its partition is served again.
    h = Harness(foo=4)
    h.join_all(["a", "b"])
    coordinator = h.coordinator
    partition = coordinator.partition_for(GROUP)
    coordinator.set_partition_status(partition, PartitionStatus.LOADING)
    h.tick(30_000)
    assert set(h.group().members) == {"a", "b"}
    coordinator.restart_sessions(partition, h.now)
    coordinator.set_partition_status(partition, PartitionStatus.ACTIVE)
    h.tick(9_999)
    h.hb("a", h.group().members["a"].epoch)
    assert set(h.group().members) == {"a", "b"}
    h.tick(1)
    assert set(h.group().members) == {"a"}


def test_a_groups_own_session_timeout_and_interval_are_its_members() -> None:
    # Group configs (consumer.session.timeout.ms / consumer.heartbeat.interval.ms): the next
    # heartbeat answers the group's interval, and sessions run out at the group's timeout.
    h = Harness(foo=4)
    h.coordinator.group_configs.set(
        GROUP, {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "250"}
    )
    assert h.hb("a", 0, topics=["foo"]).heartbeat_interval_ms == 250
    h.tick(2_999)
    assert set(h.group().members) == {"a"}
    h.tick(1)
    assert set(h.group().members) == set()
    h.coordinator.group_configs.set(GROUP, {})  # back to the broker's
    assert h.hb("b", 0, topics=["foo"]).heartbeat_interval_ms == 500
    h.tick(3_000)
    assert set(h.group().members) == {"b"}
