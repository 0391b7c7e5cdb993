"""Producer snapshots: Kafka's ProducerSnapshot v1 bytes, the choice of snapshot at start, and
how a snapshot and the surviving batches make one producer state."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import crc32c
import pytest
from minicoord.server.data.producers import INT32_MAX, ProducerStates
from minicoord.storage import producer_snapshots as snapshots
from minicoord.storage import tools
from minicoord.storage.batch import BatchInfo
from minicoord.storage.producer_snapshots import CorruptSnapshot, SnapshotEntry

ENTRY = SnapshotEntry(producer_id=42, epoch=3, last_sequence=9, last_offset=120, offset_delta=4,
                      timestamp=1_700_000_000_000)  # fmt: skip


def test_the_bytes_are_kafkas_producer_snapshot_v1() -> None:
    body = struct.pack(">i", 1) + struct.pack(
        ">qhiqiqiq", 42, 3, 9, 120, 4, 1_700_000_000_000, -1, -1
    )
    expected = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert snapshots.encode([ENTRY]) == expected
    assert snapshots.decode(expected) == [ENTRY]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b[:-1], "do not fill"),
        (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], "CRC-32C mismatch"),
        (lambda b: struct.pack(">h", 2) + b[2:], "version 2"),
        (lambda b: b[:3], "too short"),
    ],
)
def test_damage_is_refused(damage: object, why: str) -> None:
    data = damage(snapshots.encode([ENTRY, ENTRY._replace(producer_id=43)]))  # type: ignore[operator]
    with pytest.raises(CorruptSnapshot, match=why):
        snapshots.decode(data)


def test_the_latest_sound_snapshot_not_past_the_log_end_is_taken(tmp_path: Path) -> None:
    for offset in (10, 20, 30):
        snapshots.write(tmp_path, offset, [ENTRY._replace(last_offset=offset - 1)])
    # Only the newest two are kept.
    assert snapshots.snapshot_offsets(tmp_path) == [20, 30]
    (tmp_path / snapshots.snapshot_name(20)).write_bytes(b"\x00\x01torn")
    snapshots.write(tmp_path, 20, [ENTRY._replace(last_offset=19)])
    # The log lost what the newest one describes (a crash before it was written out).
    assert snapshots.latest(tmp_path, 25) == (20, [ENTRY._replace(last_offset=19)])
    assert snapshots.snapshot_offsets(tmp_path) == [20]
    (tmp_path / snapshots.snapshot_name(20)).write_bytes(b"\x00\x01torn")
    assert snapshots.latest(tmp_path, 25) is None
    assert snapshots.snapshot_offsets(tmp_path) == []


def info(pid: int, epoch: int, first: int, count: int, base: int) -> BatchInfo:
    return BatchInfo(
        base_offset=base,
        size=100,
        attributes=0,
        last_offset_delta=count - 1,
        first_timestamp=5,
        max_timestamp=5,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=first,
        records=count,
    )


def test_a_snapshot_restores_producers_whose_batches_are_gone() -> None:
    live = ProducerStates()
    live.update(info(1, 0, 0, 3, 0), 0)  # offsets 0-2, sequences 0-2
    live.update(info(2, 0, INT32_MAX - 1, 4, 3), 3)  # sequences wrap: MAX-1 .. 1
    live.update(info(3, 0, 0, 1, 7), 7)
    saved = live.snapshot()
    # Only producer 3's batch survived (retention took offsets 0-6); then producer 3 wrote
    # again after the snapshot at offset 8.
    loaded = ProducerStates()
    loaded.load(info(3, 0, 0, 1, 7))
    loaded.load(info(3, 0, 1, 1, 8))
    loaded.merge_snapshot(8, saved)
    retry = loaded.check(info(1, 0, 0, 3, -1))
    assert retry.duplicate is not None and retry.duplicate.base_offset == 0
    wrapped = loaded.check(info(2, 0, INT32_MAX - 1, 4, -1))
    assert wrapped.duplicate is not None and wrapped.duplicate.base_offset == 3
    # Producer 3's batches past the snapshot say more than it does: they are kept.
    assert [b.base_offset for b in loaded.producers[3].batches] == [7, 8]


def test_a_snapshot_overrides_what_older_batches_say() -> None:
    live = ProducerStates()
    live.update(info(1, 0, 0, 1, 0), 0)
    live.update(info(1, 1, 0, 1, 1), 1)  # a new epoch
    saved = live.snapshot()
    loaded = ProducerStates()
    loaded.load(info(1, 0, 0, 1, 0))  # compaction took the epoch-1 batch, not this one
    loaded.merge_snapshot(2, saved)
    assert loaded.producers[1].epoch == 1
    assert loaded.check(info(1, 0, 1, 1, -1)).error.name == "INVALID_PRODUCER_EPOCH"


def test_only_regular_files_are_snapshots(tmp_path: Path) -> None:
    # As Kafka's isSnapshotFile: a directory of a snapshot's name is not read or deleted.
    (tmp_path / snapshots.snapshot_name(5)).mkdir()
    snapshots.write(tmp_path, 3, [ENTRY])
    assert snapshots.latest(tmp_path, 10) == (3, [ENTRY])
    assert (tmp_path / snapshots.snapshot_name(5)).is_dir()


def test_log_verify_notes_a_damaged_snapshot_without_failing(tmp_path: Path) -> None:
    # Damage there loses nothing (the next start deletes it and serves without it): a note,
    # not a problem, so the exit status stays 0.
    partition = tmp_path / "t-0"
    partition.mkdir()
    snapshots.write(partition, 5, [ENTRY])
    path = partition / snapshots.snapshot_name(5)
    path.write_bytes(path.read_bytes()[:-1])
    out = io.StringIO()
    assert tools.verify(tmp_path, out) == 0
    assert f"note: {path}: 1 entries do not fill" in out.getvalue()
