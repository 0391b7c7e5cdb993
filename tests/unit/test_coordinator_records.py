"""What the coordinator persists: `__consumer_offsets` records that decode to the live state."""

from __future__ import annotations

from helpers_coordinator import GROUP, REBALANCE_MS, SESSION_MS, Harness, assignment, decoded
from minicoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_key,
    group_metadata_key,
    offset_commit_key,
)
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry

PARTITION = Harness().coordinator.partition_for(GROUP)


def group_records(h: Harness) -> list[tuple[int, Record]]:
    return [(p, r) for p, r in h.records if isinstance(decode_key(r.key), GroupMetadataKey)]


def test_no_record_until_the_leader_syncs(h: Harness) -> None:
    ids = [mid for mid, _ in h.join_together(0, {"client_id": "a"}, {"client_id": "b"})]
    assert h.state() == "CompletingRebalance"
    assert h.records == []
    follower = h.sync(10, ids[1], 1)
    assert h.records == []
    assert h.heartbeat(20, ids[0], 1) == 0
    assert h.records == []
    h.sync(30, ids[0], 1, {ids[0]: b"A", ids[1]: b"B"})
    assert h.reply(follower).assignment == b"B"
    assert len(h.records) == 1


def test_group_metadata_record_at_the_leaders_sync_decodes_to_the_group(h: Harness) -> None:
    a, b, c = h.form_group(5_000, 3)
    [(partition, record)] = group_records(h)
    assert partition == PARTITION
    key, value = decoded(record)
    assert isinstance(key, GroupMetadataKey)
    assert key.group == GROUP
    assert key.version == 2
    assert isinstance(value, GroupMetadataValue)
    assert value.version == 3
    assert value.protocol_type == "consumer"
    assert value.generation == 1
    assert value.protocol == "range"
    assert value.leader == a
    assert value.current_state_timestamp == 5_000
    group = h.group()
    assert [m.member_id for m in value.members] == [a, b, c]
    for i, m in enumerate(value.members):
        live = group.members[m.member_id]
        assert m.group_instance_id is None
        assert m.client_id == f"m{i}"
        assert m.client_host == "/127.0.0.1"
        assert m.session_timeout == SESSION_MS
        assert m.rebalance_timeout == REBALANCE_MS
        assert m.subscription == live.metadata("range")
        assert m.assignment == assignment("t1", i) == live.assignment


def test_empty_generation_record_has_no_members_protocol_or_leader(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.records.clear()
    h.leave(100, (a, None), (b, None))
    [(partition, record)] = h.records
    assert partition == PARTITION
    _, value = decoded(record)
    assert value.generation == 2
    assert value.protocol_type == "consumer"
    assert value.protocol is None
    assert value.leader is None
    assert value.members == []
    assert value.current_state_timestamp == 100


def test_static_member_replacement_is_persisted(h: Harness) -> None:
    m0, _s1, m2 = h.stable(
        0, {"client_id": "m0"}, {"client_id": "s1", "instance_id": "i1"}, {"client_id": "m2"}
    )
    h.records.clear()
    outcome = h.reply(h.join(1_000, instance_id="i1", client_id="s1"))
    new = outcome.member_id
    [(_, record)] = h.records
    _, value = decoded(record)
    assert value.generation == 1
    assert value.leader == m0
    members = {m.member_id: m for m in value.members}
    assert set(members) == {m0, new, m2}
    assert members[new].group_instance_id == "i1"
    assert members[new].assignment == assignment("t1", 1)  # s1's slot


def test_offset_commit_records_decode_to_what_was_committed(h: Harness) -> None:
    errors = h.commit(
        1_234,
        [
            OffsetCommitEntry("orders", 0, 42, leader_epoch=3, metadata="meta"),
            OffsetCommitEntry("orders", 1, 7),
            OffsetCommitEntry("payments", 9, 0, metadata=None),
        ],
    )
    assert errors == [0, 0, 0]
    decoded_records = [(p, *decoded(r)) for p, r in h.records]
    assert [p for p, _, _ in decoded_records] == [PARTITION] * 3
    keys = [(k.group, k.topic, k.partition, k.version) for _, k, _ in decoded_records]
    assert keys == [
        (GROUP, "orders", 0, 1),
        (GROUP, "orders", 1, 1),
        (GROUP, "payments", 9, 1),
    ]
    values = [
        (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) for _, _, v in decoded_records
    ]
    assert values == [(42, 3, "meta", 1_234), (7, -1, "", 1_234), (0, -1, "", 1_234)]
    assert all(isinstance(k, OffsetCommitKey) for _, k, _ in decoded_records)
    assert all(isinstance(v, OffsetCommitValue) and v.version == 3 for _, _, v in decoded_records)


def test_offset_delete_writes_a_tombstone(h: Harness) -> None:
    h.commit(0, [OffsetCommitEntry("t", 0, 1), OffsetCommitEntry("t", 1, 2)])
    h.records.clear()
    result = h.absorb(h.coordinator.delete_offsets(10, GROUP, [("t", 1)]))
    assert result.value == (0, [0])
    assert result.records == [(PARTITION, Record(offset_commit_key(GROUP, "t", 1), None))]


def test_delete_groups_writes_offset_and_group_tombstones(h: Harness) -> None:
    h.commit(0, [OffsetCommitEntry("t", 0, 1), OffsetCommitEntry("u", 3, 2)])
    h.records.clear()
    assert h.absorb(h.coordinator.delete_groups(10, [GROUP])).value == [0]
    assert sorted(h.records, key=lambda pr: pr[1].key) == sorted(
        [
            (PARTITION, Record(group_metadata_key(GROUP), None)),
            (PARTITION, Record(offset_commit_key(GROUP, "t", 0), None)),
            (PARTITION, Record(offset_commit_key(GROUP, "u", 3), None)),
        ],
        key=lambda pr: pr[1].key,
    )
    assert all(r.value is None for _, r in h.records)


def test_heartbeats_and_parked_joins_write_nothing(h: Harness) -> None:
    a, b = h.form_group(0, 2)
    h.records.clear()
    for t in range(1_000, 9_000, 1_000):
        assert h.heartbeat(t, a, 1) == 0
        assert h.heartbeat(t, b, 1) == 0
    h.join(9_000, a)  # parked: the group waits for b
    assert h.records == []
