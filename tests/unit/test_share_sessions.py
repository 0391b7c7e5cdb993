"""Share sessions (server/data/shares.py): epochs as Kafka's ShareSessionCache checks them,
and the records a member holds going back when its session closes or its connection goes."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.share_partitions import ACQUIRED, AVAILABLE, InFlight
from minicoord.server.data.shares import SessionError, Shares, duration_ms


def shares() -> Shares:
    return Shares(Config(), TimerQueue(), lambda group: "earliest", lambda group: 30_000)


def test_epochs_follow_on_from_the_opening_fetch() -> None:
    s = shares()
    with pytest.raises(SessionError) as missing:
        s.session("g", "m", 1, conn="c1")
    assert missing.value.error == ErrorCode.SHARE_SESSION_NOT_FOUND
    s.session("g", "m", 0, conn="c1")
    s.session("g", "m", 1, conn="c1")
    with pytest.raises(SessionError) as stale:
        s.session("g", "m", 1, conn="c1")
    assert stale.value.error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    s.session("g", "m", 2, conn="c1")
    # -1 is accepted whatever the epoch reached.
    assert s.session("g", "m", -1, conn="c1") is s.sessions["g", "m"]


def test_closing_a_session_or_losing_its_connection_gives_the_records_back() -> None:
    s = shares()
    topic = SimpleNamespace(topic_id=uuid.uuid4())
    sp = s.partition("g", topic, 0, SimpleNamespace(log_start_offset=0, high_watermark=0), 0)
    for member, conn in (("a", "conn-a"), ("b", "conn-b")):
        session = s.session("g", member, 0, conn=conn)
        session.partitions[topic.topic_id, 0] = None
    sp.records = {0: InFlight(ACQUIRED, 1, "a"), 1: InFlight(ACQUIRED, 1, "b")}
    sp.end = 2
    s.on_disconnect("conn-a")
    assert [sp.records[o].state for o in (0, 1)] == [AVAILABLE, ACQUIRED]
    assert ("g", "a") not in s.sessions and ("g", "b") in s.sessions
    s.close("g", "b")
    assert [sp.records[o].state for o in (0, 1)] == [AVAILABLE, AVAILABLE]


def test_iso_durations_as_java_reads_the_common_forms() -> None:
    assert duration_ms("PT1H") == 3_600_000
    assert duration_ms("P1DT30M") == 86_400_000 + 1_800_000
    assert duration_ms("pt0.5s") == 500
    for bad in ("1H", "P", "PT", "P1H"):
        with pytest.raises(ValueError):
            duration_ms(bad)


def test_a_replaced_or_dropped_partition_keeps_nothing_when_its_locks_run_out() -> None:
    s = shares()
    s.keep = True
    topic = SimpleNamespace(topic_id=uuid.uuid4())
    old = s.partition("g", topic, 0, SimpleNamespace(log_start_offset=0, high_watermark=0), 0)
    old.records, old.end = {0: InFlight(ACQUIRED, 1, "a", lock="l")}, 1
    s.start_at("g", topic.topic_id, 0, 7)  # AlterShareGroupOffsets
    s.dirty.clear()
    old._on_lock_timeout(30_000, "l")
    assert s.dirty == {}
    kept = s.partitions["g", topic.topic_id, 0]
    assert kept.start == 7
    s.drop(lambda key: False)
    assert s.dirty == {("g", topic.topic_id, 0): None}  # a tombstone, nothing after it
    kept._changed()
    assert s.dirty == {("g", topic.topic_id, 0): None}
