"""DescribeGroups, ListGroups and DeleteGroups."""

from __future__ import annotations

from helpers_coordinator import GROUP, Harness, assignment, subscription
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.results import DescribedMember, GroupDescription, GroupListing


def test_describe_a_stable_group(h: Harness) -> None:
    s0, m1 = h.stable(
        0,
        {"client_id": "s0", "instance_id": "i0", "protocols": [("range", subscription("x"))]},
        {"client_id": "m1", "protocols": [("range", subscription("y"))]},
    )
    assert h.coordinator.describe_groups([GROUP]) == [
        GroupDescription(
            GROUP,
            ErrorCode.NONE,
            "Stable",
            "consumer",
            "range",
            (
                DescribedMember(
                    s0, "i0", "s0", "/127.0.0.1", subscription("x"), assignment("t1", 0)
                ),
                DescribedMember(
                    m1, None, "m1", "/127.0.0.1", subscription("y"), assignment("t1", 1)
                ),
            ),
        )
    ]


def test_describe_a_rebalancing_group_hides_protocol_metadata_and_assignment(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.join(100, a)
    [d] = h.coordinator.describe_groups([GROUP])
    assert (d.error, d.state, d.protocol_type, d.protocol_name) == (
        ErrorCode.NONE,
        "PreparingRebalance",
        "consumer",
        "",
    )
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [
        (a, b"", b""),
        (b, b"", b""),
    ]


def test_describe_a_completing_group(h: Harness) -> None:
    h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    [d] = h.coordinator.describe_groups([GROUP])
    assert d.state == "CompletingRebalance"
    assert d.protocol_name == ""
    assert len(d.members) == 2


def test_describe_an_empty_group(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.leave(10, (a, None), (b, None))
    assert h.coordinator.describe_groups([GROUP]) == [
        GroupDescription(GROUP, ErrorCode.NONE, "Empty", "consumer", "", ())
    ]


def test_describe_several_groups_including_an_unknown_one(h: Harness) -> None:
    h.form_group(0, 1, group_id="one")
    described = h.coordinator.describe_groups(["one", "missing"])
    assert [(d.group_id, d.error, d.state) for d in described] == [
        ("one", ErrorCode.NONE, "Stable"),
        ("missing", ErrorCode.GROUP_ID_NOT_FOUND, "Dead"),
    ]
    assert described[1].members == ()


def test_list_groups(h: Harness) -> None:
    h.form_group(0, 1, group_id="stable")
    h.join_together(0, {"client_id": "a", "group_id": "completing"})
    h.commit(0, [OffsetCommitEntry("t", 0, 1)], group_id="simple")
    error, listings = h.coordinator.list_groups()
    assert error is ErrorCode.NONE
    assert sorted(listings, key=lambda g: g.group_id) == [
        GroupListing("completing", "consumer", "CompletingRebalance"),
        GroupListing("simple", "", "Empty"),
        GroupListing("stable", "consumer", "Stable"),
    ]


def test_list_groups_filters_states_case_insensitively(h: Harness) -> None:
    h.form_group(0, 1, group_id="stable")
    h.commit(0, [OffsetCommitEntry("t", 0, 1)], group_id="simple")
    _, listings = h.coordinator.list_groups(states={"STABLE"})
    assert [g.group_id for g in listings] == ["stable"]
    _, listings = h.coordinator.list_groups(states={"empty", "stable"})
    assert sorted(g.group_id for g in listings) == ["simple", "stable"]
    assert h.coordinator.list_groups(states={"Dead"}) == (ErrorCode.NONE, [])


def test_list_groups_filters_types(h: Harness) -> None:
    h.form_group(0, 1, group_id="stable")
    assert [g.group_id for g in h.coordinator.list_groups(types={"Classic"})[1]] == ["stable"]
    # Kafka trims the states asked for but not the types (Group.GroupType.parse).
    assert h.coordinator.list_groups(types={"Classic "}) == (ErrorCode.NONE, [])
    assert [g.group_id for g in h.coordinator.list_groups(states={" stable "})[1]] == ["stable"]
    assert h.coordinator.list_groups(types={"consumer"}) == (ErrorCode.NONE, [])
    assert len(h.coordinator.list_groups(types=set())[1]) == 1


def test_delete_an_empty_group(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.leave(10, (a, None), (b, None))
    h.commit(20, [OffsetCommitEntry("t1", 0, 5)])
    h.records.clear()
    result = h.absorb(h.coordinator.delete_groups(30, [GROUP]))
    assert result.value == [ErrorCode.NONE]
    assert GROUP not in h.coordinator.groups.groups
    assert h.coordinator.fetch_offsets(GROUP, None) == (ErrorCode.NONE, [])
    assert len(result.records) == 2
    assert all(r.value is None for _, r in result.records)
    assert h.coordinator.describe_groups([GROUP])[0].error is ErrorCode.GROUP_ID_NOT_FOUND
    # Deleting again: it is gone.
    assert h.coordinator.delete_groups(40, [GROUP]).value == [ErrorCode.GROUP_ID_NOT_FOUND]


def test_delete_groups_answers_each_group(h: Harness) -> None:
    h.form_group(0, 1, group_id="busy")
    h.commit(0, [OffsetCommitEntry("t", 0, 1)], group_id="idle")
    result = h.absorb(h.coordinator.delete_groups(10, ["busy", "idle", "ghost"]))
    assert result.value == [
        ErrorCode.NON_EMPTY_GROUP,
        ErrorCode.NONE,
        ErrorCode.GROUP_ID_NOT_FOUND,
    ]
    assert h.state("busy") == "Stable"
    assert "idle" not in h.coordinator.groups.groups


def test_a_group_named_twice_is_answered_twice_alike(h: Harness) -> None:
    # Kafka checks every name before the request's deletions apply: NONE twice, not
    # NONE then GROUP_ID_NOT_FOUND; the group's tombstones are written once.
    h.form_group(0, 1, group_id="busy")
    h.commit(0, [OffsetCommitEntry("t", 0, 1)], group_id="idle")
    result = h.absorb(h.coordinator.delete_groups(10, ["idle", "busy", "idle", "busy"]))
    assert result.value == [ErrorCode.NONE, ErrorCode.NON_EMPTY_GROUP] * 2
    assert len(result.records) == 2  # the offset's tombstone and the group's


def test_non_empty_group_in_any_active_state_cannot_be_deleted(h: Harness) -> None:
    h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    assert h.state() == "CompletingRebalance"
    assert h.coordinator.delete_groups(1, [GROUP]).value == [ErrorCode.NON_EMPTY_GROUP]
    a = h.member_ids()[0]
    h.join(2, a, protocols=[("range", subscription("changed"))])
    assert h.state() == "PreparingRebalance"
    assert h.coordinator.delete_groups(3, [GROUP]).value == [ErrorCode.NON_EMPTY_GROUP]


def test_a_deleted_group_starts_again_from_generation_zero(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.leave(10, (a, None), (b, None))
    assert h.group().generation_id == 2
    h.absorb(h.coordinator.delete_groups(20, [GROUP]))
    _, t = h.join_new(30, client_id="again")
    assert h.reply(t).generation_id == 1
