"""OffsetCommit, OffsetFetch and OffsetDelete through the coordinator facade."""

from __future__ import annotations

import pytest
from helpers_coordinator import GROUP, Harness, decoded, subscription
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import decode_key
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.offsets import CommittedOffset

E = OffsetCommitEntry


def test_commit_then_fetch_round_trip(h: Harness) -> None:
    errors = h.commit(
        1_000, [E("orders", 0, 100, leader_epoch=4, metadata="hello"), E("orders", 1, 7)]
    )
    assert errors == [ErrorCode.NONE, ErrorCode.NONE]
    error, found = h.coordinator.fetch_offsets(GROUP, [("orders", 0), ("orders", 1), ("x", 0)])
    assert error is ErrorCode.NONE
    assert found == [
        (("orders", 0), CommittedOffset(100, 4, "hello", 1_000)),
        (("orders", 1), CommittedOffset(7, -1, "", 1_000)),
        (("x", 0), None),
    ]


def test_fetch_all_partitions(h: Harness) -> None:
    h.commit(1, [E("a", 0, 1), E("b", 2, 3)])
    h.commit(2, [E("a", 0, 5)])  # a later commit replaces the earlier one
    error, found = h.coordinator.fetch_offsets(GROUP, None)
    assert error is ErrorCode.NONE
    assert dict(found) == {
        ("a", 0): CommittedOffset(5, -1, "", 2),
        ("b", 2): CommittedOffset(3, -1, "", 1),
    }


def test_fetch_of_an_unknown_group_is_empty_not_an_error(h: Harness) -> None:
    assert h.coordinator.fetch_offsets("nobody", None) == (ErrorCode.NONE, [])
    assert h.coordinator.fetch_offsets("nobody", [("t", 0)]) == (ErrorCode.NONE, [(("t", 0), None)])


def test_simple_consumer_commit_creates_an_empty_group(h: Harness) -> None:
    assert GROUP not in h.coordinator.groups.groups
    assert h.commit(0, [E("t", 0, 9)], generation_id=-1) == [ErrorCode.NONE]
    assert h.state() == "Empty"
    assert h.group().generation_id == 0
    assert h.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][0][1].offset == 9


def test_commit_with_a_generation_to_an_unknown_group_is_illegal(h: Harness) -> None:
    errors = h.commit(0, [E("t", 0, 9), E("t", 1, 9)], generation_id=3, member_id="m")
    assert errors == [ErrorCode.ILLEGAL_GENERATION] * 2
    assert GROUP not in h.coordinator.groups.groups
    assert h.records == []


def test_members_commit_with_their_generation(h: Harness) -> None:
    a, _b = h.form_group(0, 2)
    assert h.commit(10, [E("t1", 0, 1)], generation_id=1, member_id=a) == [ErrorCode.NONE]
    assert h.commit(10, [E("t1", 0, 1)], generation_id=2, member_id=a) == [
        ErrorCode.ILLEGAL_GENERATION
    ]
    assert h.commit(10, [E("t1", 0, 1)], generation_id=1, member_id="ghost") == [
        ErrorCode.UNKNOWN_MEMBER_ID
    ]
    # Group-managed offsets may not be committed by outsiders.
    assert h.commit(10, [E("t1", 0, 1)], generation_id=-1) == [ErrorCode.UNKNOWN_MEMBER_ID]


def test_commit_during_completing_rebalance_is_rejected(h: Harness) -> None:
    (_a, _), (b, _) = h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    assert h.state() == "CompletingRebalance"
    errors = h.commit(10, [E("t1", 0, 1), E("t1", 1, 2)], generation_id=1, member_id=b)
    assert errors == [ErrorCode.REBALANCE_IN_PROGRESS] * 2
    assert h.records == []
    assert h.coordinator.fetch_offsets(GROUP, None) == (ErrorCode.NONE, [])


def test_commit_during_preparing_rebalance_is_allowed(h: Harness) -> None:
    # Kafka lets the previous generation commit; the heartbeat tells it to rejoin.
    a, b = h.form_group(0, 2)
    h.join(100, a)
    assert h.state() == "PreparingRebalance"
    assert h.commit(200, [E("t1", 1, 50)], generation_id=1, member_id=b) == [ErrorCode.NONE]


def test_a_commit_counts_as_a_sign_of_life(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    for t in range(3_000, 30_000, 3_000):
        h.heartbeat(t, a, 1)
        assert h.commit(t, [E("t1", 1, t)], generation_id=1, member_id=b) == [ErrorCode.NONE]
        h.advance(t)
    assert h.member_ids() == [a, b]


def test_simple_commit_to_an_empty_group_naming_a_member_is_allowed(h: Harness) -> None:
    # Kafka's validateOffsetCommit accepts generation -1 on an Empty group before looking
    # at the member id (the admin client and manual-assignment consumers send one).
    a, b = h.form_group(0, 2)
    h.leave(10, (a, None), (b, None))
    assert h.state() == "Empty"
    assert h.commit(20, [E("t", 0, 1)], generation_id=-1, member_id=a) == [ErrorCode.NONE]
    assert h.commit(20, [E("t", 0, 1)], generation_id=-1, member_id="x") == [ErrorCode.NONE]
    # With a generation it is a member's commit, and there are no members.
    assert h.commit(20, [E("t", 0, 1)], generation_id=2, member_id=a) == [
        ErrorCode.UNKNOWN_MEMBER_ID
    ]


# -- offset metadata size ----------------------------------------------------------------------


def test_metadata_size_limit_is_per_partition(h: Harness) -> None:
    errors = h.commit(
        0,
        [
            E("t", 0, 1, metadata="x" * 4096),
            E("t", 1, 2, metadata="x" * 4097),
            E("t", 2, 3, metadata=None),
        ],
    )
    assert errors == [ErrorCode.NONE, ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.NONE]
    _, found = h.coordinator.fetch_offsets(GROUP, None)
    assert dict(found) == {
        ("t", 0): CommittedOffset(1, -1, "x" * 4096, 0),
        ("t", 2): CommittedOffset(3, -1, "", 0),
    }
    assert [decoded(r)[0].partition for _, r in h.records] == [0, 2]


def test_metadata_size_limit_comes_from_config() -> None:
    h = Harness(offset_metadata_max_bytes=10)
    assert h.commit(0, [E("t", 0, 1, metadata="0123456789")]) == [ErrorCode.NONE]
    assert h.commit(0, [E("t", 0, 1, metadata="0123456789A")]) == [
        ErrorCode.OFFSET_METADATA_TOO_LARGE
    ]


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ("é" * 10, ErrorCode.NONE),  # 10 UTF-16 units (20 UTF-8 bytes)
        ("é" * 11, ErrorCode.OFFSET_METADATA_TOO_LARGE),
        ("😀" * 5, ErrorCode.NONE),  # 5 surrogate pairs: 10 UTF-16 units
        ("😀" * 5 + "x", ErrorCode.OFFSET_METADATA_TOO_LARGE),
    ],
)
def test_metadata_length_is_counted_like_javas_string_length(
    metadata: str, error: ErrorCode
) -> None:
    # Kafka compares String.length() (UTF-16 code units) with offset.metadata.max.bytes.
    h = Harness(offset_metadata_max_bytes=10)
    assert h.commit(0, [E("t", 0, 1, metadata=metadata)]) == [error]


# -- OffsetDelete ------------------------------------------------------------------------------


def test_offset_delete_of_an_unknown_group(h: Harness) -> None:
    result = h.coordinator.delete_offsets(0, "nope", [("t", 0)])
    assert result.value == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    assert result.records == []


def test_offset_delete_of_the_empty_group_id_is_invalid(h: Harness) -> None:
    # OffsetCommit and OffsetFetch take "" (Kafka keeps it for old clients); OffsetDelete not.
    h.commit(0, [E("t", 0, 1)], group_id="")
    result = h.coordinator.delete_offsets(10, "", [("t", 0)])
    assert result.value == (ErrorCode.INVALID_GROUP_ID, [])
    assert result.records == []
    _, found = h.coordinator.fetch_offsets("", None)
    assert [tp for tp, _ in found] == [("t", 0)]


def test_offset_delete_in_an_empty_group(h: Harness) -> None:
    h.commit(0, [E("t", 0, 1), E("t", 1, 1), E("u", 0, 1)])
    result = h.absorb(h.coordinator.delete_offsets(10, GROUP, [("t", 0), ("u", 0), ("v", 9)]))
    # A partition without a committed offset is answered NONE too, like Kafka.
    assert result.value == (ErrorCode.NONE, [ErrorCode.NONE] * 3)
    assert len(result.records) == 2
    assert all(r.value is None for _, r in result.records)
    _, found = h.coordinator.fetch_offsets(GROUP, None)
    assert [tp for tp, _ in found] == [("t", 1)]


def test_offset_delete_of_a_topic_the_group_subscribes_to() -> None:
    h = Harness()
    a, _b = h.stable(
        0,
        {"client_id": "a", "protocols": [("range", subscription("orders", "payments"))]},
        {"client_id": "b", "protocols": [("range", subscription("orders", "refunds"))]},
    )
    h.commit(
        10,
        [E("orders", 0, 1), E("refunds", 0, 1), E("old-topic", 0, 1)],
        generation_id=1,
        member_id=a,
    )
    result = h.absorb(
        h.coordinator.delete_offsets(20, GROUP, [("orders", 0), ("refunds", 0), ("old-topic", 0)])
    )
    assert result.value == (
        ErrorCode.NONE,
        [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.NONE],
    )
    assert [decoded(r)[0].topic for _, r in result.records] == ["old-topic"]
    _, found = h.coordinator.fetch_offsets(GROUP, None)
    assert sorted(tp for tp, _ in found) == [("orders", 0), ("refunds", 0)]


def test_offset_delete_in_a_non_empty_non_consumer_group() -> None:
    h = Harness()
    (_a, _), (_b, _) = h.join_together(
        0,
        {"client_id": "a", "protocol_type": "connect", "protocols": [("v1", b"opaque")]},
        {"client_id": "b", "protocol_type": "connect", "protocols": [("v1", b"opaque")]},
    )
    result = h.coordinator.delete_offsets(10, GROUP, [("t", 0)])
    assert result.value == (ErrorCode.NON_EMPTY_GROUP, [])
    assert result.records == []


def test_offset_delete_when_the_group_has_not_chosen_a_protocol_yet(h: Harness) -> None:
    # The first join phase is open: no subscription is known yet, and a consumer group whose
    # topics are unknown counts as subscribed to all (Kafka 4's ClassicGroup.isSubscribedToTopic).
    h.commit(0, [E("t1", 0, 1)])
    h.join(10, client_id="b")  # a pending member keeps the phase open
    h.join_new(10, client_id="a")
    assert h.state() == "PreparingRebalance"
    assert h.coordinator.delete_offsets(20, GROUP, [("t1", 0)]).value == (
        ErrorCode.NONE,
        [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC],
    )


@pytest.mark.parametrize(
    ("setup", "generation", "member"),
    [
        ("none", -1, ""),  # a simple consumer: the commit makes an Empty group
        ("none", 3, "m"),  # a generation of a group this coordinator does not know
        ("formed", 1, "a"),
        ("formed", 2, "a"),  # a stale generation
        ("formed", 1, "ghost"),
        ("formed", -1, ""),  # an outsider to a group that manages its offsets
        ("completing", 1, "b"),
        ("empty", -1, "someone"),
        ("preparing", 1, "a"),  # a rebalance under way: the current generation still commits
        ("loading", 1, "a"),  # the group's offsets partition is not being served
    ],
)
@pytest.mark.parametrize("version", [7, 9])
def test_commit_one_decides_as_commit_offsets_does(
    setup: str, generation: int, member: str, version: int
) -> None:
    # The handler's one-partition path calls commit_one; every other shape commit_offsets.
    outcomes = []
    for single in (True, False):
        h = Harness()
        names: dict[str, str] = {}
        if setup in ("formed", "preparing", "loading"):
            names["a"], names["b"] = h.form_group(0, 2)
        if setup == "preparing":
            h.join_new(10, client_id="c")
            assert h.state() == "PreparingRebalance"
        elif setup == "loading":
            h.coordinator.begin_loading(h.coordinator.partition_for(GROUP))
        elif setup == "completing":
            (names["a"], _), (names["b"], _) = h.join_together(
                0, {"client_id": "a"}, {"client_id": "b"}
            )
        elif setup == "empty":
            h.commit(0, [E("t1", 0, 1)], generation_id=-1)
        member_id = names.get(member, member)
        before = len(h.records)
        if single:
            errors = [
                h.coordinator.commit_one(
                    h.records, 50, GROUP, generation, member_id, "t1", 2, 77, 5, version
                )
            ]
        else:
            result = h.coordinator.commit_offsets(
                50, GROUP, generation, member_id, None, [E("t1", 2, 77, 5, "")], version
            )
            errors = h.absorb(result).value
        written = [decoded(record) for _, record in h.records[before:]]
        outcomes.append((errors, written, h.coordinator.fetch_offsets(GROUP, None)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("how", ["offset-delete", "topic-deleted"])
def test_an_empty_group_left_without_offsets_stays_until_the_retention_check(how: str) -> None:
    # Kafka writes only the offsets' tombstones (deleteOffsets, onPartitionsDeleted); the group
    # goes at the next cleanupGroupMetadata. Until then it is there, and DeleteGroups of it
    # (a test's teardown after deleting its topic) succeeds. A group that only ever stored
    # offsets has nothing left in the log: it goes at once (as replaying the log gives).
    h = Harness(offsets_retention_check_interval_ms=60_000)
    h.coordinator.start(0)
    spec = {"client_id": "c", "protocols": [("range", subscription("t"))]}
    for group_id in (GROUP, "other"):
        (member,) = h.stable(0, {**spec, "group_id": group_id})
        h.commit(1, [E("t", 0, 1)], group_id=group_id, generation_id=1, member_id=member)
        h.leave(2, (member, None), group_id=group_id)
    h.commit(3, [E("t", 0, 1)], group_id="offsets-only")
    if how == "offset-delete":
        for group_id in (GROUP, "other", "offsets-only"):
            h.absorb(h.coordinator.delete_offsets(10, group_id, [("t", 0)]))
    else:
        h.absorb(h.coordinator.delete_topic_offsets(10, "t"))
    assert h.group(GROUP).state.name == "EMPTY" and h.group("other").state.name == "EMPTY"
    assert "offsets-only" not in h.coordinator.groups.groups
    assert h.absorb(h.coordinator.delete_groups(20, [GROUP])).value == [ErrorCode.NONE]
    h.advance(59_999)
    assert "other" in h.coordinator.groups.groups
    h.advance(60_000)  # the retention check
    assert "other" not in h.coordinator.groups.groups


def test_transactional_commits_skip_the_member_and_rebalance_checks(h: Harness) -> None:
    # Kafka's ClassicGroup.validateOffsetCommit with isTransactional: TxnOffsetCommit v0-2
    # name no member or generation, so a group with members takes them, and no commit of a
    # transaction is refused for a rebalance in progress.
    refused = h.coordinator.txn_commit_refused
    a, _b = h.form_group(0, 2)
    assert h.commit(10, [E("t1", 0, 1)], generation_id=-1) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert refused(10, GROUP, -1, "", None) is None
    assert refused(10, GROUP, 1, a, None) is None
    assert refused(10, GROUP, 7, a, None) is ErrorCode.ILLEGAL_GENERATION
    assert refused(10, GROUP, 1, "ghost", None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert refused(10, "unknown-group", 3, "m", None) is ErrorCode.ILLEGAL_GENERATION


def test_transactional_commits_during_completing_rebalance_are_taken(h: Harness) -> None:
    (_a, _), (b, _) = h.join_together(0, {"client_id": "a"}, {"client_id": "b"})
    assert h.state() == "CompletingRebalance"
    assert h.coordinator.txn_commit_refused(10, GROUP, 1, b, None) is None


def test_a_deleted_topic_takes_the_open_transactions_offsets_of_it(h: Harness) -> None:
    # Kafka's onPartitionsDeleted tombstones the pending transactional offsets of the deleted
    # partitions as well as the committed ones: a transaction that commits afterwards makes
    # none of them the group's.
    h.commit(1, [E("t", 0, 5)])
    pending = h.coordinator.pending_txn_offsets()
    offsets = h.coordinator.offsets
    for tp, group_id in ((("t", 0), GROUP), (("t", 1), "txn-only"), (("u", 0), GROUP)):
        committed = CommittedOffset(9, -1, "", 2)
        pending.add(7, group_id, tp, committed, 100, offsets.get(group_id, tp))
    result = h.absorb(h.coordinator.delete_topic_offsets(10, "t"))
    assert result.value == 2
    keys = [decode_key(r.key) for _, r in result.records if r.value is None]
    gone = sorted((k.group, k.topic, k.partition) for k in keys if hasattr(k, "topic"))
    assert gone == [(GROUP, "t", 0), ("txn-only", "t", 1)]
    assert not pending.unstable(GROUP, ("t", 0)) and not pending.unstable("txn-only", ("t", 1))
    assert pending.unstable(GROUP, ("u", 0))
    pending.complete(offsets, 7, commit=True)
    assert offsets.get(GROUP, ("t", 0)) is None and offsets.get("txn-only", ("t", 1)) is None
    assert offsets.get(GROUP, ("u", 0)).offset == 9  # type: ignore[union-attr]
