"""offsets.retention.minutes, by Kafka's rules, driven by the retention timer on a manual clock."""

from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import decode_key
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.state import GroupState

MINUTE = 60_000
CHECK = 5_000


def coordinator() -> GroupCoordinator:
    ids = iter(f"m{i}" for i in range(100))
    c = GroupCoordinator(
        Config(offsets_retention_minutes=1, offsets_retention_check_interval_ms=CHECK),
        new_member_id=lambda _: next(ids),
    )
    c.start(0)
    return c


def stable_member(
    c: GroupCoordinator, now: int, topics: list[str], metadata: bytes | None = None
) -> tuple[str, int]:
    if metadata is None:
        metadata = bytes(
            ConsumerProtocolSubscription(topics=topics, user_data=None).encode(version=0)
        )
    c.join_group(
        now,
        "j",
        group_id="g",
        member_id="",
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        session_timeout_ms=10 * MINUTE,
        rebalance_timeout_ms=MINUTE,
        protocol_type="consumer",
        protocols=[("range", metadata)],
        require_known_member_id=False,
    )
    sync = c.sync_group(
        now,
        "s",
        group_id="g",
        generation_id=1,
        member_id="m0",
        group_instance_id=None,
        protocol_type=None,
        protocol_name=None,
        assignments={},
    )
    assert sync.reply_for("s").error is ErrorCode.NONE
    return "m0", 1


def commit(c: GroupCoordinator, now: int, topic: str, generation: int, member: str) -> None:
    result = c.commit_offsets(now, "g", generation, member, None, [OffsetCommitEntry(topic, 0, 7)])
    assert result.value == [ErrorCode.NONE]


def tombstoned(records: list) -> list[object]:
    return [decode_key(r.key) for _, r in records if r.value is None]


def test_a_stable_consumer_group_loses_only_offsets_of_topics_it_left() -> None:
    c = coordinator()
    member, generation = stable_member(c, 0, ["kept"])
    commit(c, 1_000, "kept", generation, member)
    commit(c, 1_000, "dropped", generation, member)
    c.heartbeat(MINUTE, "g", member, generation)
    assert c.advance(MINUTE).records == []  # not yet: committed at 1 s, retention 60 s
    c.heartbeat(MINUTE + CHECK, "g", member, generation)
    result = c.advance(MINUTE + 2 * CHECK)
    gone = tombstoned(result.records)
    assert [(k.topic, k.partition) for k in gone] == [("dropped", 0)]
    assert set(c.offsets.all_for("g")) == {("kept", 0)}
    assert c.groups.groups["g"].state is GroupState.STABLE


def test_an_empty_groups_offsets_expire_from_when_it_became_empty() -> None:
    c = coordinator()
    member, generation = stable_member(c, 0, ["t"])
    commit(c, 0, "t", generation, member)
    c.leave_group(50_000, "g", [(member, None)])  # Empty from 50 s on
    assert c.groups.groups["g"].state is GroupState.EMPTY
    c.advance(105_000)  # 105 s: 55 s after emptying, though 105 s after the commit
    assert set(c.offsets.all_for("g")) == {("t", 0)}
    result = c.advance(115_000)
    assert c.offsets.all_for("g") == {}
    assert "g" not in c.groups.groups  # nothing left of it: deleted
    kinds = sorted(type(k).__name__ for k in tombstoned(result.records))
    assert kinds == ["GroupMetadataKey", "OffsetCommitKey"]


def test_offsets_only_groups_expire_by_commit_time() -> None:
    c = coordinator()
    assert c.commit_offsets(0, "g", -1, "", None, [OffsetCommitEntry("t", 0, 1)]).value == [
        ErrorCode.NONE
    ]
    assert c.commit_offsets(30_000, "g", -1, "", None, [OffsetCommitEntry("t", 1, 1)]).value == [
        ErrorCode.NONE
    ]
    c.advance(65_000)
    assert set(c.offsets.all_for("g")) == {("t", 1)}
    c.advance(95_000)
    assert c.offsets.all_for("g") == {} and "g" not in c.groups.groups


def future_subscription(*topics: str) -> bytes:
    """A subscription of a version this coordinator does not know (9): the version-0 fields
    every version starts with, then fields of its own."""
    v0 = bytes(ConsumerProtocolSubscription(topics=list(topics), user_data=None).encode(version=0))
    return b"\x00\x09" + v0[2:] + b"\x00\x00\x00\x07future-fields"


def test_a_future_subscription_version_still_names_its_topics() -> None:
    # Kafka reads every subscription in the version-0 layout (computeSubscribedTopics).
    c = coordinator()
    member, generation = stable_member(c, 0, [], future_subscription("kept"))
    commit(c, 1_000, "kept", generation, member)
    commit(c, 1_000, "dropped", generation, member)
    c.heartbeat(MINUTE + CHECK, "g", member, generation)
    result = c.advance(MINUTE + 2 * CHECK)
    assert [(k.topic, k.partition) for k in tombstoned(result.records)] == [("dropped", 0)]
    deleted = c.delete_offsets(MINUTE + 2 * CHECK, "g", [("kept", 0)])
    assert deleted.value == (ErrorCode.NONE, [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC])


def test_a_subscription_that_does_not_parse_keeps_every_offset_of_a_stable_group() -> None:
    # Topics unknown: no offset expires (offsetExpirationCondition) and every topic counts as
    # subscribed (isSubscribedToTopic), where reading "no topics" would lose them all.
    c = coordinator()
    member, generation = stable_member(c, 0, [], b"\x00\x00\x00\x00\x00\x05ab")
    commit(c, 1_000, "t1", generation, member)
    c.heartbeat(MINUTE + CHECK, "g", member, generation)
    assert tombstoned(c.advance(MINUTE + 2 * CHECK).records) == []
    assert set(c.offsets.all_for("g")) == {("t1", 0)}
    deleted = c.delete_offsets(MINUTE + 2 * CHECK, "g", [("t1", 0)])
    assert deleted.value == (ErrorCode.NONE, [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC])


def test_a_commits_own_retention_time_sets_when_it_expires() -> None:
    # OffsetCommit v2-4's retention_time_ms (sarama's Consumer.Offsets.Retention): Kafka's
    # OffsetMetadataManager keeps now + retention as the offset's expire timestamp, and
    # OffsetExpirationConditionImpl expires it then, shorter or longer than the group's
    # offsets.retention.minutes (1 minute here). -1 leaves it to the group's.
    from minicoord.protocol.records import decode_value

    c = coordinator()
    entries = [OffsetCommitEntry("short", 0, 1)]
    written = c.commit_offsets(0, "g", -1, "", None, entries, 2, retention_time_ms=7_000)
    assert written.value == [ErrorCode.NONE]
    for topic, retention in (("long", 3_600_000), ("default", -1)):
        entry = [OffsetCommitEntry(topic, 0, 1)]
        assert c.commit_offsets(0, "g", -1, "", None, entry, 4, retention).value == [ErrorCode.NONE]
    # The record is Kafka's version 1 value, the one with an expire timestamp.
    ((_, record),) = written.records
    value = decode_value(decode_key(record.key), record.value)
    assert (value.version, value.offset, value.expire_timestamp) == (1, 1, 7_000)
    c.advance(5_000)
    assert set(c.offsets.all_for("g")) == {("short", 0), ("long", 0), ("default", 0)}
    c.advance(10_000)
    assert set(c.offsets.all_for("g")) == {("long", 0), ("default", 0)}
    c.advance(65_000)
    assert set(c.offsets.all_for("g")) == {("long", 0)}
    c.advance(3_600_000)
    assert c.offsets.all_for("g") == {} and "g" not in c.groups.groups


def test_a_retention_time_past_a_long_wraps_as_javas_sum() -> None:
    # now + Long.MAX_VALUE overflows in Kafka to a time long past: the offset expires at the
    # next check. Unwrapped, the sum would not fit the record's int64 at all.
    from minicoord.protocol.records import decode_value

    c = coordinator()
    entries = [OffsetCommitEntry("t", 0, 1)]
    written = c.commit_offsets(10, "g", -1, "", None, entries, 2, retention_time_ms=2**63 - 1)
    assert written.value == [ErrorCode.NONE]
    ((_, record),) = written.records
    expire = decode_value(decode_key(record.key), record.value).expire_timestamp
    assert expire == 10 + (2**63 - 1) - 2**64
    c.advance(CHECK)
    assert c.offsets.all_for("g") == {}


def test_an_offset_an_open_transaction_holds_does_not_expire_nor_does_its_group() -> None:
    """Kafka's retention skips a partition with a pending transactional offset, and keeps
    a group with an open transaction; once it ends, retention goes on as before."""
    c = coordinator()
    member, generation = stable_member(c, 0, ["t"])
    commit(c, 0, "t", generation, member)
    commit(c, 0, "u", generation, member)
    c.leave_group(1_000, "g", [(member, None)])
    committed = c.offsets.get("g", ("t", 0))
    c.pending_txn_offsets().add(7, "g", ("t", 0), committed, 10, committed)  # type: ignore[arg-type]
    result = c.advance(2 * MINUTE)
    assert [(k.topic, k.partition) for k in tombstoned(result.records)] == [("u", 0)]
    assert set(c.offsets.all_for("g")) == {("t", 0)}
    assert "g" in c.groups.groups

    c.pending_txn_offsets().complete(c.offsets, 7, commit=False)
    result = c.advance(2 * MINUTE + CHECK)
    gone = tombstoned(result.records)
    assert sorted(type(k).__name__ for k in gone) == ["GroupMetadataKey", "OffsetCommitKey"]
    assert [(k.topic, k.partition) for k in gone if hasattr(k, "partition")] == [("t", 0)]
    assert "g" not in c.groups.groups
