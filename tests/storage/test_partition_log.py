"""The on-disk partition log: appends, rolls, recovery from damage, and the cleaner."""

from __future__ import annotations

import io
import logging
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minicoord.protocol.records import (
    Record,
    decode_key,
    decode_value,
    offset_commit_key,
    offset_commit_value,
)
from minicoord.storage import tools
from minicoord.storage.batch import (
    CorruptBatch,
    StoredRecord,
    check_batch,
    decode_batch,
    encode_batch,
)
from minicoord.storage.cleaner import clean
from minicoord.storage.log_loader import CLEANED, SWAP, CorruptLog, swap_name
from minicoord.storage.partition_log import PartitionLog
from minicoord.storage.scan import SCAN_CHUNK, scan_segment


def commit(group: str, partition: int, offset: int) -> Record:
    return Record(offset_commit_key(group, "t", partition), offset_commit_value(offset, -1, "", 1))


def tombstone(group: str, partition: int) -> Record:
    return Record(offset_commit_key(group, "t", partition), None)


def append(plog: PartitionLog, records: list[Record], timestamp: int) -> int:
    """As the broker does at the end of a turn: accept, write out, commit."""
    base = plog.append(records, timestamp)
    plog.commit(plog.write_out())
    return base


def open_log(path: Path, segment_bytes: int = 1 << 20) -> PartitionLog:
    plog = PartitionLog(path, "t-7", segment_bytes)
    plog.open()
    return plog


def offsets_by_key(plog: PartitionLog) -> dict[tuple[str, int], int | None]:
    latest: dict[tuple[str, int], int | None] = {}
    for r in plog.records():
        key = decode_key(r.key)
        latest[(key.group, key.partition)] = (
            None if r.value is None else decode_value(key, r.value).offset
        )
    return latest


def test_batches_round_trip_in_kafkas_format() -> None:
    records = [commit("g", 0, 5), tombstone("g", 1)]
    data = encode_batch(40, records, timestamp=1234)
    batch = check_batch(data)
    assert (batch.base_offset, batch.magic, batch.last_offset_delta) == (40, 2, 1)
    decoded = list(batch)
    assert [r.offset for r in decoded] == [40, 41]
    assert bytes(decoded[0].key) == records[0].key and decoded[1].value is None
    damaged = bytearray(data)
    damaged[-1] ^= 0x01
    with pytest.raises(CorruptBatch, match="CRC"):
        check_batch(bytes(damaged))


def test_appends_roll_and_reopen_with_the_same_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=1024)
    for i in range(200):
        assert append(plog, [commit("g", i % 3, i)], timestamp=i) == i
    assert len(plog.segments) > 3
    names = sorted(p.name for p in tmp_path.glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert [int(n[:-4]) for n in names] == [s.base_offset for s in plog.segments]
    plog.close()
    again = open_log(tmp_path, segment_bytes=1024)
    assert again.next_offset == 200
    assert [r.offset for r in again.records()] == list(range(200))
    assert append(again, [commit("g", 0, 999)], timestamp=1) == 200


def test_a_torn_last_batch_is_truncated_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = open_log(tmp_path)
    for i in range(5):
        append(plog, [commit("g", 0, i)], timestamp=i)
    plog.close()
    (segment,) = tmp_path.glob("*.log")
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 7)  # the last write was cut short
    with caplog.at_level(logging.WARNING, "minicoord.storage"):
        again = open_log(tmp_path)
    assert offsets_by_key(again) == {("g", 0): 3}
    assert again.next_offset == 4
    (cut,) = again.truncations
    assert cut.path == segment and cut.position == size - (size // 5)
    assert f"truncating {segment} at byte {cut.position}" in caplog.text
    # The next append continues where the valid data ends.
    assert append(again, [commit("g", 0, 77)], timestamp=9) == 4


def test_a_torn_tail_before_an_empty_segment_is_truncated_and_it_goes(tmp_path: Path) -> None:
    # A segment rolled just before a crash is empty; the one before it is still the tail.
    plog = open_log(tmp_path)
    for i in range(5):
        append(plog, [commit("g", 0, i)], timestamp=i)
    plog.roll()
    plog.close()
    first, empty = sorted(tmp_path.glob("*.log"))
    assert empty.stat().st_size == 0
    size = first.stat().st_size
    with open(first, "r+b") as f:
        f.truncate(size - 7)
    again = open_log(tmp_path)
    (cut,) = again.truncations
    assert cut.path == first and cut.position == size - (size // 5)
    assert offsets_by_key(again) == {("g", 0): 3}
    assert sorted(tmp_path.glob("*.log")) == [first]
    # Appends continue where the valid data ends, with no gap in the offsets.
    assert append(again, [commit("g", 0, 77)], timestamp=9) == 4
    again.close()
    assert [r.offset for r in open_log(tmp_path).records()] == [0, 1, 2, 3, 4]


def test_an_empty_segment_after_sound_ones_stays(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(3):
        append(plog, [commit("g", 0, i)], timestamp=i)
    plog.roll()
    plog.close()
    again = open_log(tmp_path)
    assert again.truncations == [] and len(again.segments) == 2
    assert append(again, [commit("g", 0, 9)], timestamp=9) == 3


def test_a_flipped_bit_in_the_last_batch_is_truncated(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(5):
        append(plog, [commit("g", 0, i)], timestamp=i)
    plog.close()
    (segment,) = tmp_path.glob("*.log")
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0x10
    segment.write_bytes(bytes(data))
    again = open_log(tmp_path)
    assert offsets_by_key(again) == {("g", 0): 3}
    assert "CRC" in again.truncations[0].reason


def test_damage_before_valid_data_in_the_active_segment_refuses_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(5):
        append(plog, [commit("g", 0, i)], timestamp=i)
    plog.close()
    (segment,) = tmp_path.glob("*.log")
    data = bytearray(segment.read_bytes())
    batch_size = len(data) // 5
    data[batch_size + 30] ^= 0x01  # inside the second of five batches
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptLog) as info:
        open_log(tmp_path)
    assert info.value.path == segment and info.value.position == batch_size
    # Nothing was cut: the file is as it was, for an operator to inspect.
    assert segment.read_bytes() == bytes(data)


def test_damage_in_an_earlier_segment_refuses_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=400)
    for i in range(40):
        append(plog, [commit("g", i % 4, i)], timestamp=i)
    plog.close()
    first = sorted(tmp_path.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[-2] ^= 0x04  # the last batch of a closed segment is not the log's tail
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptLog, match=first.name):
        open_log(tmp_path, segment_bytes=400)


def test_a_damaged_length_field_is_not_mistaken_for_a_torn_tail(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(4):
        append(plog, [commit("g", 0, i)], timestamp=i)
    plog.close()
    (segment,) = tmp_path.glob("*.log")
    data = bytearray(segment.read_bytes())
    data[8] = 0x7F  # the first batch now claims to run far past the end of the file
    segment.write_bytes(bytes(data))
    scan = scan_segment(bytes(data), 0)
    assert scan.damage_at == 0 and scan.valid_after
    with pytest.raises(CorruptLog):
        open_log(tmp_path)


@pytest.mark.parametrize(
    "values",
    [
        # Two batches of 1,048,582 bytes (each within the default message.max.bytes): the
        # first chunk ends inside the second one's length prefix.
        [1_048_510, 1_048_510],
        # The sizes a kgo producer wrote, then small batches after them.
        [1_000_000, 1_048_500, 1_048_508, 10, 10],
        # The first chunk ends `left` bytes into a 2 MB batch (a first batch of one record
        # with a 2-byte key is its value plus 74 bytes): at its start, inside its 12-byte
        # length prefix, and just past it.
        *[[SCAN_CHUNK - 74 - left, 2_000_000, 10] for left in (0, 1, 6, 11, 12)],
    ],
)
def test_batches_larger_than_a_scan_chunk_read_back_after_a_restart(
    tmp_path: Path, values: list[int]
) -> None:
    # The scan reads a segment SCAN_CHUNK bytes at a time; a batch larger than that whose
    # length prefix the chunk cut must be read whole, not judged from a chunk's worth.
    plog = open_log(tmp_path, segment_bytes=1 << 30)
    for i, n in enumerate(values):
        append(plog, [Record(b"k%d" % i, bytes([i]) * n)], timestamp=i)
    plog.close()
    (segment,) = tmp_path.glob("*.log")
    scan = scan_segment(segment.read_bytes(), 0)
    assert (scan.damage_at, scan.batches, scan.next_offset) == (None, len(values), len(values))
    again = open_log(tmp_path, segment_bytes=1 << 30)
    assert [(r.offset, len(r.value or b"")) for r in again.records()] == list(enumerate(values))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 700), min_size=1, max_size=12), st.integers(100, 300))
def test_a_scan_reads_every_batch_whatever_the_chunk_size(sizes: list[int], chunk: int) -> None:
    # Every alignment of batches against chunk boundaries, at a small scale: batches below,
    # at and above the chunk size, in any order.
    from unittest import mock

    data = b"".join(
        encode_batch(i, [Record(b"k", bytes(n))], timestamp=i) for i, n in enumerate(sizes)
    )
    with mock.patch("minicoord.storage.scan.SCAN_CHUNK", chunk):
        scan = scan_segment(data, 0)
    assert (scan.damage_at, scan.batches, scan.next_offset) == (None, len(sizes), len(sizes))


def test_a_torn_batch_holding_a_batch_image_is_a_torn_tail(tmp_path: Path) -> None:
    # A value may hold a whole batch's bytes (a copy of a segment, say). A crash that cuts
    # its batch right after that copy leaves an intact batch inside the torn one: it is
    # not the log going on (nothing sound follows it to the end, its offset is an old
    # one), so the tail is cut as any torn tail, as Kafka's LogSegment.recover cuts it.
    image = encode_batch(0, [Record(b"k", b"copied")], timestamp=1)
    plog = open_log(tmp_path)
    append(plog, [Record(b"a", b"first")], timestamp=1)
    append(plog, [Record(b"b", b"x" * 100 + image + b"y" * 5000)], timestamp=2)
    plog.close()
    (segment,) = tmp_path.glob("*.log")
    data = segment.read_bytes()
    second = len(encode_batch(0, [Record(b"a", b"first")], timestamp=1))
    cut = data.index(image, second) + len(image) + 10
    segment.write_bytes(data[:cut])
    scan = scan_segment(data[:cut], 0)
    assert (scan.damage_at, scan.valid_after) == (second, False)
    again = open_log(tmp_path)
    assert [(r.offset, r.value) for r in again.records()] == [(0, b"first")]
    assert append(again, [Record(b"c", b"after")], timestamp=3) == 1


def test_compaction_keeps_the_latest_value_per_key(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=2048)
    keys = 10
    for i in range(1000):
        append(plog, [commit("g", i % keys, i)], timestamp=i)
    before = offsets_by_key(plog)
    assert plog.dirty_ratio() == 1.0
    result = clean(plog, now_ms=10_000, delete_retention_ms=1_000_000)
    assert result is not None and result.records_before > 900
    assert offsets_by_key(plog) == before
    # Closed segments hold at most one record per key; only the active one has more.
    closed_records = result.records_after
    assert closed_records <= keys
    assert len(list(plog.records())) <= keys + 2048 // 50
    assert plog.dirty_ratio() == 0.0
    plog.close()
    assert offsets_by_key(open_log(tmp_path, segment_bytes=2048)) == before


def test_tombstones_outlive_delete_retention_then_go(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    append(plog, [commit("g", 0, 1)], timestamp=100)
    append(plog, [tombstone("g", 0)], timestamp=200)
    for i in range(30):
        append(plog, [commit("h", 1, i)], timestamp=300 + i)
    # Young tombstone: kept, so a replay still sees the deletion.
    clean(plog, now_ms=1_000, delete_retention_ms=10_000)
    assert offsets_by_key(plog)[("g", 0)] is None
    # Old enough: the key is gone altogether.
    clean(plog, now_ms=20_000, delete_retention_ms=10_000)
    assert ("g", 0) not in offsets_by_key(plog)
    assert offsets_by_key(plog)[("h", 1)] == 29


def test_an_unfinished_cleaning_is_discarded_at_open(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    for i in range(40):
        append(plog, [commit("g", i % 2, i)], timestamp=i)
    before = offsets_by_key(plog)
    plog.close()
    leftover = tmp_path / swap_name(0, 999, CLEANED)
    leftover.write_bytes(b"half a cleaning")
    again = open_log(tmp_path, segment_bytes=600)
    assert not leftover.exists()
    assert offsets_by_key(again) == before


def test_an_interrupted_swap_is_completed_at_open(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    for i in range(60):
        append(plog, [commit("g", i % 2, i)], timestamp=i)
    before = offsets_by_key(plog)
    segments = list(plog.segments)
    closed, active = segments[:-1], segments[-1]
    assert len(closed) >= 2
    # Run a cleaning up to its commit point (the .swap file), then "crash" before swapping.
    from minicoord.storage.batch import encode_stored
    from minicoord.storage.scan import records_of

    latest: dict[bytes, object] = {}
    for s in segments:
        for r in records_of(s.path.read_bytes()):
            latest[r.key] = r
    kept = [r for r in latest.values() if r.offset < active.base_offset]  # type: ignore[attr-defined]
    swap = tmp_path / swap_name(closed[0].base_offset, active.base_offset, SWAP)
    swap.write_bytes(encode_stored(sorted(kept, key=lambda r: r.offset)) if kept else b"")  # type: ignore[attr-defined]
    plog.close()
    again = open_log(tmp_path, segment_bytes=600)
    assert not swap.exists()
    assert len(again.segments) == 2  # the cleaned segment and the active one
    assert offsets_by_key(again) == before


# Batches of several records, keyed from a small set (so most are superseded), some without a
# key, some tombstones; each batch written at its own time.
_cleaner_batches = st.lists(
    st.lists(
        st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e", None]), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    min_size=1,
    max_size=40,
)


def _clean_against_model(plog: PartitionLog, now: int, retention: int) -> None:
    """Clean, and check the records left against a model over every stored record: the cleaner
    maps only the dirty closed segments and skips whole batches on their headers, walking only
    those holding a survivor; either way it must keep the newest record of each key among the
    closed segments (Kafka's rule: the active segment is not read)."""
    stored = list(plog.records())
    active_base = plog.segments[-1].base_offset
    closed = [r for r in stored if r.offset < active_base]
    newest = {r.key: r.offset for r in closed if r.key is not None}

    def survives(r: StoredRecord) -> bool:
        if r.offset >= active_base:
            return True
        expired = r.value is None and r.timestamp + retention <= now
        return r.key is not None and newest[r.key] == r.offset and not expired

    result = clean(plog, now_ms=now, delete_retention_ms=retention)
    after = [(r.offset, r.key, r.value) for r in plog.records()]
    assert after == [(r.offset, r.key, r.value) for r in stored if survives(r)]
    if result is None:
        assert not closed
    else:
        assert result.records_before == len(closed)
        assert result.records_after == sum(1 for r in closed if survives(r))
        assert plog.dirty_ratio() == 0.0


@settings(max_examples=300, deadline=None)
@given(
    _cleaner_batches,
    st.lists(_cleaner_batches, max_size=2),
    st.sampled_from([200, 500, 2000]),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.integers(0, 60),
)
def test_cleaning_keeps_exactly_the_newest_record_of_each_key(
    batches: list[list[tuple[bytes | None, bool]]],
    later: list[list[list[tuple[bytes | None, bool]]]],
    segment_bytes: int,
    rolls: list[bool],
    age: int,
) -> None:
    # Later rounds append to a log whose oldest segment the last cleaning made (the clean
    # head, not mapped again): its records must still go when a newer one supersedes them.
    plog = PartitionLog(None, "t-0", segment_bytes)
    plog.open()
    at = 0
    for round_, round_batches in enumerate([batches, *later]):
        for batch in round_batches:
            records = [Record(key, None if dead else b"v%d" % at) for key, dead in batch]
            append(plog, records, timestamp=at)
            at += 1
        if rolls[round_]:
            plog.roll()
        _clean_against_model(plog, now=at, retention=age)


def test_segment_ms_rolls_on_the_batch_that_comes_that_late(tmp_path: Path) -> None:
    # Kafka rolls on append once a batch's timestamp is more than segment.ms past the active
    # segment's first batch (LogSegment.shouldRoll), whatever the segment's size.
    plog = open_log(tmp_path)
    plog.segment_ms = 100
    append(plog, [commit("g", 0, 0)], timestamp=1_000)
    append(plog, [commit("g", 0, 1)], timestamp=1_100)  # exactly segment.ms: no roll
    assert len(plog.segments) == 1
    append(plog, [commit("g", 0, 2)], timestamp=1_101)
    assert [s.base_offset for s in plog.segments] == [0, 2]
    append(plog, [commit("g", 0, 3)], timestamp=1_150)
    assert len(plog.segments) == 2  # counted from the new segment's first batch
    plog.close()
    # After a restart the active segment's first batch is found again by the scan.
    plog = open_log(tmp_path)
    plog.segment_ms = 100
    append(plog, [commit("g", 0, 4)], timestamp=1_202)
    assert [s.base_offset for s in plog.segments] == [0, 2, 4]


def test_segment_ms_counts_from_the_segments_making_when_its_first_batch_has_no_timestamp(
    tmp_path: Path,
) -> None:
    # Kafka's timeWaitedForRoll: without a first batch timestamp, now - the segment's creation.
    plog = open_log(tmp_path)
    plog.segment_ms = 60_000
    append(plog, [commit("g", 0, 0)], timestamp=-1)
    append(plog, [commit("g", 0, 1)], timestamp=-1)
    append(plog, [commit("g", 0, 2)], timestamp=int(time.time() * 1000))  # no roll at once
    assert len(plog.segments) == 1
    plog.segments[-1].created -= 61  # a minute and a second old
    append(plog, [commit("g", 0, 3)], timestamp=-1)
    assert [s.base_offset for s in plog.segments] == [0, 3]


def test_min_compaction_lag_keeps_young_segments_out_of_a_cleaning(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.segment_ms = 0  # a segment per batch
    for i in range(6):
        append(plog, [commit("g", 0, i)], timestamp=1_000 * (i + 1))
    assert len(plog.segments) == 6
    now = 6_500
    # Records younger than 3 s (those of 4 s and later) may not be compacted away.
    cleanable = plog.cleanable(now, min_lag_ms=3_000)
    assert [s.base_offset for s in cleanable] == [0, 1, 2]
    result = clean(plog, now, delete_retention_ms=10**9, cleanable=cleanable)
    assert result is not None and (result.records_before, result.records_after) == (3, 1)
    assert [r.value is not None for r in plog.records()] == [True] * 4
    assert [decode_value(decode_key(r.key), r.value).offset for r in plog.records()] == [
        2,
        3,
        4,
        5,
    ]
    # Without a lag every closed segment counts: the records of offsets 3 and 4 go too.
    assert clean(plog, now, 10**9, plog.cleanable(now)) is not None
    assert [decode_value(decode_key(r.key), r.value).offset for r in plog.records()] == [4, 5]


def test_records_without_a_timestamp_are_as_old_as_their_segments_last_write(
    tmp_path: Path,
) -> None:
    # Kafka falls back to the segment file's mtime (LogSegment.largestTimestamp): such
    # records are protected by min.compaction.lag.ms like any others, not taken as ancient.
    plog = open_log(tmp_path)
    append(plog, [commit("g", 0, 0)], timestamp=-1)
    plog.roll()
    append(plog, [commit("g", 0, 1)], timestamp=-1)
    now = int(time.time() * 1000)
    assert plog.cleanable(now, min_lag_ms=60_000) == []
    assert plog.cleanable(now + 61_000, min_lag_ms=60_000) == plog.segments[:1]


def test_a_cleaning_writes_a_segment_per_segment_bytes_of_sources_oldest_first(
    tmp_path: Path,
) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    for i in range(40):
        append(plog, [commit("g", i, i)], timestamp=i)  # distinct keys: all survive
    closed = plog.segments[:-1]
    assert len(closed) >= 4
    old = int(time.time()) - 3600
    for segment in closed:  # sources an hour old: the cleaned files keep their age
        os.utime(segment.path, (old, old))
    before = offsets_by_key(plog)
    from minicoord.storage.cleaner import prepare

    prepared = prepare(plog, now_ms=10_000, delete_retention_ms=10**9)
    assert prepared is not None
    groups = [s.base_offset for s in prepared.cleaned]
    assert len(groups) > 1 and all(s.size <= 600 for s in prepared.cleaned)
    # Each group committed on its own (a swap file each), in the order Kafka commits them.
    swaps = sorted(p.name for p in tmp_path.glob("*" + SWAP))
    assert [int(name.split("-")[0]) for name in swaps] == groups
    assert all(abs(s.last_modified() - old * 1000) < 1000 for s in prepared.cleaned)
    # A crash now: every swap is completed at open, and nothing is lost.
    for segment in plog.segments:
        segment.close()
    again = open_log(tmp_path, segment_bytes=600)
    assert [s.base_offset for s in again.segments[:-1]] == groups
    assert offsets_by_key(again) == before


def test_max_compaction_lag_makes_a_cleaning_due_whatever_the_dirty_ratio(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.segment_ms = 0
    for i in range(3):
        append(plog, [commit("g", 0, i)], timestamp=1_000 * (i + 1))
    cleanable = plog.cleanable(10_000)
    # The oldest dirty batch is from 1 s: 8 s of lag is past due at 10 s, 9 s is not.
    assert plog.compaction_overdue(cleanable, 10_000, max_lag_ms=8_000)
    assert not plog.compaction_overdue(cleanable, 10_000, max_lag_ms=9_000)
    assert not plog.compaction_overdue([], 10_000, max_lag_ms=0)


def test_a_read_in_a_gap_compaction_left_at_a_segment_end_goes_on_to_the_next(
    tmp_path: Path,
) -> None:
    # The cleaner drops an expired tombstone at the end of a closed segment: its offset is in
    # no segment any more. A fetch there must get the next batch (Kafka's LocalLog.read goes
    # on to the next segment), or a consumer at that offset waits forever.
    plog = open_log(tmp_path)
    plog.segment_ms = 100
    append(plog, [commit("g", 0, 0)], timestamp=1_000)  # offset 0
    append(plog, [tombstone("g", 1)], timestamp=1_001)  # offset 1
    append(plog, [commit("g", 2, 2)], timestamp=1_200)  # offset 2, a new segment
    assert [s.base_offset for s in plog.segments] == [0, 2]
    clean(plog, now_ms=100_000, delete_retention_ms=1_000)
    assert [r.offset for r in plog.records()] == [0, 2]

    def offsets(data: bytes) -> list[int]:
        return [r.offset for r in decode_batch(data)]

    assert offsets(plog.read(0, 1 << 20)) == [0]  # one segment per read, as Kafka's
    assert offsets(plog.read(1, 1 << 20)) == [2]
    assert offsets(plog.read(2, 1 << 20)) == [2]
    assert plog.read(3, 1 << 20) == b""  # the high watermark


@pytest.mark.parametrize("on_disk", [True, False])
def test_records_without_timestamps_expire_by_the_segments_age(
    tmp_path: Path, on_disk: bool
) -> None:
    # A producer may send no timestamp (-1). Kafka's retention.ms then goes by the segment
    # file's mtime (LogSegment.largestTimestamp), so such records do not stay for ever; a
    # memory segment goes by when its last such batch came.
    if on_disk:
        plog = open_log(tmp_path, segment_bytes=1024)
    else:
        plog = PartitionLog(None, "t-7", 1024)
        plog.open()
    for i in range(40):
        append(plog, [commit("g", 0, i)], timestamp=-1)
    assert len(plog.segments) > 2
    closed = plog.segments[:-1]
    assert all(s.max_timestamp == -1 for s in closed)
    written_ms = max(s.last_modified() for s in plog.segments)
    assert abs(written_ms - time.time() * 1000) < 60_000  # when they were written: now
    assert plog.apply_retention(written_ms + 500, 1_000, -1) == []
    dropped = plog.apply_retention(written_ms + 5_000, 1_000, -1)
    assert len(dropped) == len(closed) + 1  # the active one too: every record expired
    assert plog.log_start_offset == 40 == plog.next_offset


def test_a_roll_hands_the_buffered_batches_to_the_os_first(tmp_path: Path) -> None:
    # Under log.flush.policy=none batches wait in the process for the periodic write. A roll
    # writes them out before the next segment's file exists, so a process killed after rolls
    # leaves no empty segment past lost data (which read as a hole below the log's end).
    plog = open_log(tmp_path)
    plog.segment_ms = 0  # a segment per batch
    for i in range(4):
        plog.append([commit("g", 0, i)], timestamp=1_000 * (i + 1))  # never written out
    assert [s.base_offset for s in plog.segments] == [0, 1, 2, 3]
    # The process dies here: only what reached the OS is there for the next start.
    reopened = open_log(tmp_path)
    assert reopened.next_offset == 3  # the last batch, still in the dead process, is lost
    assert [decode_value(decode_key(r.key), r.value).offset for r in reopened.records()] == [
        0,
        1,
        2,
    ]


def test_log_verify_calls_damage_what_the_loader_does_with_it(tmp_path: Path) -> None:
    # A torn last batch followed by an empty segment (rolled just before a crash) is a tail
    # the loader cuts, and `log verify` says so; an unfinished cleaning is deleted, a
    # finished one's swap-in completed, and verify says which.
    directory = tmp_path / "t-7"
    plog = open_log(directory)
    for i in range(5):
        plog.append([commit("g", 0, i)], timestamp=1_000)
    plog.flush()
    plog.close()
    [segment] = sorted(directory.glob("*.log"))
    segment.write_bytes(segment.read_bytes()[:-20])
    (directory / "00000000000000000005.log").write_bytes(b"")
    cleaned = directory / swap_name(0, 4, CLEANED)
    cleaned.write_bytes(b"")
    out = io.StringIO()
    assert tools.verify(tmp_path, out) == 1
    report = out.getvalue()
    assert f"damaged tail (truncated at next start): {segment} at byte" in report
    assert "corruption" not in report
    assert f"note: {cleaned} is an unfinished cleaning; the next start deletes it" in report
    reopened = open_log(directory)  # no CorruptLog: the tail is cut
    assert reopened.next_offset == 4 and len(reopened.truncations) == 1
    assert not cleaned.exists()
    reopened.close()
    assert tools.verify(tmp_path, io.StringIO()) == 0
