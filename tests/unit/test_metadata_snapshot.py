"""The cluster metadata log compacted at start (server/metadata_snapshot.py): whatever history
of topics (`__consumer_offsets` too), configs (broker configs set at runtime too), ACLs, SCRAM
users, group configs, client quotas, client-metrics subscriptions and producer id blocks
wrote it, the compacted log reads
back to the same state, and so does a log holding both the old records and the snapshot (a
crash between appending the snapshot and moving the log start)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import AlterClientQuotasRequest
from minicoord.protocol import metadata_records as mr
from minicoord.protocol.records import Record
from minicoord.server import client_quotas, metadata_snapshot
from minicoord.server.broker import Broker
from minicoord.server.config import Config
from minicoord.server.security import records as acl_records
from minicoord.server.security.acls import AclFilter
from minicoord.server.security.specs import parse_acl
from minicoord.server.security.users import apply_record
from minicoord.server.topics import METADATA_TOPIC
from minicoord.storage.log import LogManager, log_dir

NAMES = ["t0", "t1", "t2", "t3"]
TOPIC_CONFIGS = [{}, {"retention.ms": "1000"}, {"cleanup.policy": "compact", "segment.ms": "9"}]
ACLS = [
    "allow User:a Read group:g",
    "deny User:* Write topic:t0",
    "allow User:b All topic:p- prefixed",
]
GROUP_CONFIGS = [
    {},
    {"consumer.session.timeout.ms": "20000"},
    {"consumer.heartbeat.interval.ms": "3000", "consumer.session.timeout.ms": "30000"},
]

BROKER_CONFIGS = [{}, {"log.retention.ms": "5000"}, {"log.segment.bytes": "2097152"}]

SUBSCRIPTIONS = [
    {},
    {"interval.ms": "1000"},
    {"metrics": "org.apache.kafka.", "match": "client_id=a.*"},
]

QUOTA_ENTITIES = [(("user", "u1"),), (("user", None),), (("client-id", "c"), ("user", "u1"))]

operation = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 3),
              st.sampled_from(TOPIC_CONFIGS)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("grow"), st.sampled_from(NAMES), st.integers(1, 2)),
    st.tuples(st.just("alter"), st.sampled_from(NAMES), st.sampled_from(TOPIC_CONFIGS)),
    st.tuples(st.just("acl"), st.sampled_from(ACLS)),
    st.tuples(st.just("unacl"), st.sampled_from(["User:a", "User:*", "User:b"])),
    st.tuples(st.just("user"), st.sampled_from(["u1", "u2"]), st.sampled_from([1, 2]),
              st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("unuser"), st.sampled_from(["u1", "u2"]), st.sampled_from([1, 2])),
    st.tuples(st.just("group"), st.sampled_from(["g1", "g2"]), st.sampled_from(GROUP_CONFIGS)),
    st.tuples(st.just("broker"), st.sampled_from(["", "0"]), st.sampled_from(BROKER_CONFIGS)),
    st.tuples(st.just("metrics"), st.sampled_from(["s1", "s2"]), st.sampled_from(SUBSCRIPTIONS)),
    st.tuples(st.just("pids")),
    st.tuples(st.just("feature"), st.sampled_from([0, 1])),
    st.tuples(st.just("offsets")),
    st.tuples(st.just("quota"), st.sampled_from(QUOTA_ENTITIES),
              st.sampled_from(["producer_byte_rate", "request_percentage"]),
              st.none() | st.sampled_from([1024.0, 2048.0, 0.5])),
)  # fmt: skip


def _broker(data_dir: Path) -> Broker:
    broker = Broker(Config(), logs=LogManager(data_dir))
    broker.logs.lock()
    broker.open_metadata()
    return broker


def _apply(broker: Broker, op: tuple[Any, ...]) -> None:
    kind, *args = op
    topics = broker.topics
    if kind == "create" and topics.get(args[0]) is None:
        broker.create_topic(args[0], args[1], args[2])
    elif kind == "delete" and (topic := topics.get(args[0])) is not None:
        broker.delete_topic(topic)
    elif kind == "grow" and (topic := topics.get(args[0])) is not None:
        broker.add_partitions(topic, topic.partitions + args[1])
    elif kind == "alter" and (topic := topics.get(args[0])) is not None:
        broker.persist_metadata(topics.alter_configs(topic, args[1]))
    elif kind == "acl":
        broker.add_acls([parse_acl(args[0])])
    elif kind == "unacl":
        _, records = acl_records.delete(broker.acls, [AclFilter(principal=args[0])])
        broker.persist_metadata(records)
    elif kind in ("user", "unuser"):
        name, mechanism = args[0], args[1]
        record: Any
        if kind == "user":
            salt = args[2]
            record = mr.UserScramCredentialRecord(
                name=name, mechanism=mechanism, salt=salt, stored_key=salt * 2,
                server_key=salt * 3, iterations=4096,
            )  # fmt: skip
        else:
            record = mr.RemoveUserScramCredentialRecord(name=name, mechanism=mechanism)
        apply_record(broker.user_store(), record)
        broker.persist_metadata([mr.encode(record)])
    elif kind == "group":
        broker.persist_metadata(broker.coordinator.group_configs.set(args[0], dict(args[1])))
    elif kind == "broker":
        broker.alter_broker_configs(args[0], dict(args[1]))
    elif kind == "metrics":
        broker.alter_client_metrics(args[0], dict(args[1]))
    elif kind == "offsets":  # made on a group's first FindCoordinator
        broker.create_offsets_topic()
    elif kind == "quota":
        entry = AlterClientQuotasRequest.EntryData
        request = entry(
            entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in args[0]],
            ops=[entry.OpData(key=args[1], value=args[2] or 0.0, remove=args[2] is None)],
        )
        _, records = client_quotas.alter(broker.client_quotas, [request])
        broker.persist_metadata(records)
    elif kind == "feature":  # UpdateFeatures of group.version
        broker.update_features(broker.features.records([("group.version", args[0], 2)]))
    elif kind == "pids":
        ids = broker.data.producer_ids
        record = mr.ProducerIdsRecord(
            broker_id=0, broker_epoch=-1, next_producer_id=ids.claim_block()
        )
        broker.persist_metadata([mr.encode(record)])


def _state(broker: Broker) -> dict[str, Any]:
    topics = broker.topics
    users = broker.users
    groups = broker.coordinator.group_configs
    return {
        "topics": [
            (t.name, t.topic_id, t.partitions, dict(topics.config_of(t).overrides))
            for t in topics.user_topics()
        ],
        "acls": sorted(((str(i), repr(a)) for i, a in broker.acls.items())),
        "users": {
            m: {n: (c.salt, c.stored_key, c.server_key, c.iterations) for n, c in u.items()}
            for m, u in (users.scram.items() if users is not None else ())
            if u
        },
        "groups": (dict(groups.overrides), dict(groups.session_ms), dict(groups.interval_ms)),
        "producer ids": broker.data.producer_ids.next_block_start,
        "quotas": {e: dict(v) for e, v in broker.client_quotas.entities.items()},
        "offsets": topics.offsets.partitions if topics.offsets_topic_exists else None,
        "broker configs": dict(topics.dynamic),
        "client metrics": dict(broker.client_metrics.overrides),
        "features": (broker.features.finalized(), broker.consumer_protocol),
        # What every topic takes from them.
        "retention": [topics.config_of(t).retention_ms for t in topics.user_topics()],
    }


def _records_in_log(data_dir: Path) -> int:
    broker = _broker(data_dir)
    try:
        plog = broker.logs.get(METADATA_TOPIC, 0)
        assert plog is not None
        return sum(1 for _ in plog.records())
    finally:
        broker.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=1, max_size=40))
def test_a_compacted_log_reads_back_to_the_same_state(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(metadata_snapshot, "MIN_DEAD_RECORDS", 0)
        data_dir = Path(tmp)
        broker = _broker(data_dir)
        for op in ops:
            _apply(broker, op)
        expected = _state(broker)
        broker.close()

        reopened = _broker(data_dir)
        assert _state(reopened) == expected  # the replay, uncompacted
        state = (
            reopened.topics,
            reopened.data.producer_ids,
            reopened.coordinator.group_configs,
            reopened.acls,
            reopened.users,
            reopened.client_quotas,
            reopened.features,
            reopened.client_metrics,
        )
        snapshot = metadata_snapshot.snapshot_records(0, *state)
        assert metadata_snapshot.live_records(*state) == len(snapshot)
        # The crash window: the snapshot appended after the old records, the start not moved.
        plog = reopened.logs.get(METADATA_TOPIC, 0)
        assert plog is not None
        if snapshot:
            plog.append([Record(None, v) for v in snapshot], 0)
        reopened.close()
        both = _broker(data_dir)
        assert _state(both) == expected
        compacted = both.compact_metadata()
        assert _state(both) == expected
        both.close()

        after = _broker(data_dir)
        assert _state(after) == expected
        after.close()
        if compacted:
            assert _records_in_log(data_dir) == len(snapshot)


def test_compaction_drops_the_old_segments_and_keeps_the_live_topics(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    for i in range(200):  # a CI job's topics, made and deleted run after run
        broker.delete_topic(broker.create_topic(f"run-{i}", 2))
    broker.create_topic("kept", 3, {"retention.ms": "60000"})
    broker.close()
    assert _records_in_log(tmp_path) == 200 * 4 + 5

    again = _broker(tmp_path)
    assert again.compact_metadata()
    start = again.logs.get(METADATA_TOPIC, 0).log_start_offset  # type: ignore[union-attr]
    again.close()
    assert start == 200 * 4 + 5
    segments = sorted(log_dir(tmp_path, METADATA_TOPIC, 0).glob("*.log"))
    assert [int(s.stem) for s in segments] == [start]
    assert _records_in_log(tmp_path) == 5  # TopicRecord, its config, three partitions

    last = _broker(tmp_path)
    [kept] = last.topics.user_topics()
    assert (kept.name, kept.partitions) == ("kept", 3)
    assert last.topics.config_of(kept).overrides == {"retention.ms": "60000"}
    assert not last.compact_metadata()  # nothing dead left to drop
    last.close()


def test_a_short_log_or_mostly_live_log_is_left_alone(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    for i in range(20):
        broker.delete_topic(broker.create_topic(f"run-{i}", 1))
    for i in range(300):
        broker.create_topic(f"live-{i}", 1)
    broker.close()
    again = _broker(tmp_path)
    assert not again.compact_metadata()  # 60 dead records, 600 live
    again.close()


def test_undecodable_records_keep_the_log_as_it_is(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    for i in range(100):
        broker.delete_topic(broker.create_topic(f"run-{i}", 1))
    # A record of a type this version does not know (a newer minicoord's, say).
    broker.persist_metadata([b"\x01\x7f\x00\x00"])
    broker.close()
    again = _broker(tmp_path)
    assert not again.compact_metadata()
    again.close()
    assert _records_in_log(tmp_path) == 100 * 3 + 1
