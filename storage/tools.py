"""Offline tools over a data directory: dump, verify, compact (`minicoord log …`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from minicoord.protocol.records import decode_key, decode_value
from minicoord.storage.cleaner import CleanResult, clean
from minicoord.storage.log import DurableStore
from minicoord.storage.partition_log import (
    CLEANED,
    SUFFIX,
    SWAP,
    PartitionLog,
    partition_dir,
    partitions_in,
    records_of,
    scan_segment,
)


def partitions(data_dir: Path, only: int | None = None) -> list[int]:
    if only is not None:
        return [only] if partition_dir(data_dir, only).is_dir() else []
    return partitions_in(data_dir)


def _segments(directory: Path) -> Iterator[Path]:
    yield from sorted(directory.glob("*" + SUFFIX))


def dump(data_dir: Path, only: int | None = None, out: TextIO = sys.stdout) -> tuple[int, int]:
    """Print every record decoded; returns (records printed, damaged segments)."""
    count = 0
    damaged = 0
    for partition in partitions(data_dir, only):
        for path in _segments(partition_dir(data_dir, partition)):
            data = path.read_bytes()
            # A damaged log is what an operator most wants to dump, but records_of raises
            # CorruptBatch at a damaged batch (a traceback, and no other partition printed).
            # Print the sound batches before the damage and name it on stderr instead.
            scan = scan_segment(data, int(path.name[: -len(SUFFIX)]))
            if scan.damage_at is not None:
                data = data[: scan.damage_at]
            for r in records_of(data):
                try:
                    key = decode_key(r.key)
                    value = "<tombstone>" if r.value is None else decode_value(key, r.value)
                except Exception as exc:
                    key, value = r.key, f"<undecodable: {exc!r}>"
                out.write(
                    f"partition={partition} offset={r.offset} timestamp={r.timestamp} "
                    f"key={key} value={value}\n"
                )
                count += 1
            if scan.damage_at is not None:
                damaged += 1
                print(
                    f"minicoord: {path} is damaged at byte {scan.damage_at} ({scan.reason}); "
                    "its records from there on are not shown (see `minicoord log verify`)",
                    file=sys.stderr,
                )
    return count, damaged


def verify(data_dir: Path, out: TextIO = sys.stdout) -> int:
    """Check every CRC; prints problems and returns their number (0: the log is sound)."""
    problems = 0
    for partition in partitions(data_dir):
        directory = partition_dir(data_dir, partition)
        for leftover in [*directory.glob("*" + CLEANED), *directory.glob("*" + SWAP)]:
            out.write(f"note: {leftover} is an interrupted cleaning; the next start finishes it\n")
        segments = list(_segments(directory))
        batches = 0
        for index, path in enumerate(segments):
            scan = scan_segment(path.read_bytes(), int(path.name[: -len(SUFFIX)]))
            batches += scan.batches
            if scan.damage_at is not None:
                problems += 1
                tail = index == len(segments) - 1 and not scan.valid_after
                what = "damaged tail (truncated at next start)" if tail else "corruption"
                out.write(f"{what}: {path} at byte {scan.damage_at}: {scan.reason}\n")
        out.write(f"partition {partition}: {len(segments)} segments, {batches} sound batches\n")
    return problems


def compact(
    data_dir: Path, num_partitions: int, delete_retention_ms: int, segment_bytes: int
) -> list[CleanResult]:
    """Run the cleaner over every partition, the active segment included (server stopped)."""
    store = DurableStore(data_dir, num_partitions, segment_bytes=segment_bytes)
    store.lock()
    results = []
    try:
        for partition in partitions(data_dir):
            plog: PartitionLog = store.open_partition(partition)
            plog.roll()
            result = clean(plog, int(time.time() * 1000), delete_retention_ms)
            if result is not None:
                results.append(result)
    finally:
        store.close()
    return results
