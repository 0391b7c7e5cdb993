"""Offline tools over a data directory: dump, verify, compact (`minicoord log …`).

They take the directory's lock first, as `minicoord serve` does, so they never read or
rewrite logs a running server is writing: against a live directory they refuse (exit status
2), naming the process that holds it. A copy of a live directory is readable: its last batch
may be torn, which dump and verify report as a damaged tail, as recovery would truncate it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

from minicoord.protocol import metadata_records
from minicoord.protocol.records import UnknownRecordType, decode_key, decode_value
from minicoord.storage import producer_snapshots
from minicoord.storage.batch import check_batch, iter_batches
from minicoord.storage.cleaner import CleanResult, clean
from minicoord.storage.control_batch import ABORT, COMMIT, marker_type
from minicoord.storage.log import LogManager, StoreError, log_dir, logs_in
from minicoord.storage.log_loader import CLEANED, SWAP, tail_index
from minicoord.storage.scan import scan_segment
from minicoord.storage.segment import SUFFIX
from minicoord.storage.txn_index import PartitionTxns

OFFSETS_TOPIC = "__consumer_offsets"
METADATA_TOPIC = "__cluster_metadata"


def selected(
    data_dir: Path, topic: str | None = None, partition: int | None = None
) -> list[tuple[str, int]]:
    return [
        (t, p)
        for t, p in logs_in(data_dir)
        if (topic is None or t == topic) and (partition is None or p == partition)
    ]


def _segments(directory: Path) -> Iterator[Path]:
    yield from sorted(directory.glob("*" + SUFFIX))


def _describe(topic: str, key: bytes | None, value: bytes | None) -> tuple[object, object]:
    """A record's key and value as a person reads them, by what the log holds."""
    try:
        if topic == OFFSETS_TOPIC and key is not None:
            decoded = decode_key(key)
            return decoded, "<tombstone>" if value is None else decode_value(decoded, value)
        if topic == METADATA_TOPIC and value is not None:
            return None, metadata_records.decode(value)
    except Exception as exc:
        return key, f"<undecodable: {exc!r}>"
    return key, value


def dump(
    data_dir: Path,
    partition: int | None = None,
    out: TextIO = sys.stdout,
    topic: str | None = None,
) -> tuple[int, int]:
    """Print every record decoded; returns (records printed, damaged segments)."""
    with _locked(data_dir):
        return _dump(data_dir, partition, out, topic)


def _dump(data_dir: Path, partition: int | None, out: TextIO, topic: str | None) -> tuple[int, int]:
    count = 0
    damaged = 0
    for name, index in selected(data_dir, topic, partition):
        for path in _segments(log_dir(data_dir, name, index)):
            data = path.read_bytes()
            # A damaged log is what an operator most wants to dump, but a damaged batch does
            # not parse: print the sound batches before the damage and name it on stderr.
            scan = scan_segment(data, int(path.name[: -len(SUFFIX)]))
            if scan.damage_at is not None:
                data = data[: scan.damage_at]
            for batch in iter_batches(data):
                parsed = check_batch(batch)
                # As kafka-dump-log shows them: a transaction's records with their producer,
                # and its marker as one, not as a record.
                producer = (
                    f" producer_id={parsed.producer_id} producer_epoch={parsed.producer_epoch}"
                    if parsed.is_transactional
                    else ""
                )
                if parsed.is_control_batch:
                    kind = marker_type(batch)
                    marker = "COMMIT" if kind == COMMIT else "ABORT" if kind == ABORT else "?"
                    out.write(
                        f"topic={name} partition={index} offset={parsed.base_offset} "
                        f"timestamp={parsed.max_timestamp} marker={marker}{producer}\n"
                    )
                    count += 1
                    continue
                for r in parsed:
                    key, value = _describe(
                        name,
                        None if r.key is None else bytes(r.key),
                        None if r.value is None else bytes(r.value),
                    )
                    headers = f" headers={r.headers}" if r.headers else ""
                    out.write(
                        f"topic={name} partition={index} offset={r.offset} "
                        f"timestamp={r.timestamp} key={key} value={value}{headers}{producer}\n"
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
    """Check every CRC, and that every `__consumer_offsets` record decodes as the loader will
    decode it; prints problems and returns their number (0: the logs are sound)."""
    with _locked(data_dir):
        problems = 0
        for name, index in selected(data_dir):
            directory = log_dir(data_dir, name, index)
            for leftover in directory.glob("*" + CLEANED):
                out.write(
                    f"note: {leftover} is an unfinished cleaning; the next start deletes it\n"
                )
            for leftover in directory.glob("*" + SWAP):
                out.write(
                    f"note: {leftover} is a finished cleaning whose swap-in was interrupted; the "
                    "next start completes it\n"
                )
            for offset in producer_snapshots.snapshot_offsets(directory):
                snapshot = directory / producer_snapshots.snapshot_name(offset)
                try:
                    producer_snapshots.decode(snapshot.read_bytes())
                except (OSError, producer_snapshots.CorruptSnapshot) as exc:
                    out.write(
                        f"note: {snapshot}: {exc} (a producer snapshot: deleted at the next "
                        "start, an older one or the batches serve instead)\n"
                    )
            segments = list(_segments(directory))
            tail = tail_index([path.stat().st_size for path in segments])
            batches = 0
            for position, path in enumerate(segments):
                data = path.read_bytes()
                scan = scan_segment(data, int(path.name[: -len(SUFFIX)]))
                batches += scan.batches
                if name == OFFSETS_TOPIC:
                    problems += _undecodable(path, data[: scan.damage_at], out)
                if scan.damage_at is not None:
                    problems += 1
                    cut = position >= tail and not scan.valid_after  # as the loader decides
                    what = "damaged tail (truncated at next start)" if cut else "corruption"
                    out.write(f"{what}: {path} at byte {scan.damage_at}: {scan.reason}\n")
            out.write(f"{name}-{index}: {len(segments)} segments, {batches} sound batches\n")
        return problems


def _undecodable(path: Path, data: bytes, out: TextIO) -> int:
    """Offsets records in sound batches that the loader could not decode (the partition
    would not be served); a record of an unknown type is skipped at start, so only noted."""
    problems = 0
    for batch in iter_batches(data):
        for r in check_batch(batch):
            if r.key is None:
                continue
            try:
                key = decode_key(bytes(r.key))
                if r.value is not None:
                    decode_value(key, bytes(r.value))
            except UnknownRecordType as exc:
                out.write(f"note: {path} offset {r.offset}: {exc} (skipped at start)\n")
            except Exception as exc:
                problems += 1
                out.write(f"undecodable: {path} offset {r.offset}: {exc!r}\n")
    return problems


def compact(
    data_dir: Path,
    delete_retention_ms: int,
    segment_bytes: int,
    compacted_topics: Mapping[str, tuple[int, int, int]] | None = None,
) -> list[CleanResult]:
    """Run the cleaner over `__consumer_offsets` and the given compacted topics, the active
    segment included (server stopped). `compacted_topics`: each topic's delete.retention.ms,
    min.compaction.lag.ms and segment.bytes, which it is cleaned by as the server's cleaner
    would (`segment_bytes` is the offsets topic's)."""
    logs = LogManager(data_dir)
    logs.lock()
    results = []
    wanted = {OFFSETS_TOPIC: (delete_retention_ms, 0, segment_bytes), **(compacted_topics or {})}
    now = int(time.time() * 1000)
    try:
        for name, index in selected(data_dir):
            if name not in wanted:
                continue
            retention, min_lag, log_segment_bytes = wanted[name]
            txns = PartitionTxns()
            plog = logs.open_log(name, index, log_segment_bytes, txns.load)
            logs.install(name, index, plog)
            txns.resolve_from(plog)
            plog.roll()
            cleanable = txns.stable(plog.cleanable(now, min_lag), plog.next_offset)
            result = clean(plog, now, retention, cleanable, txns.aborted_ranges())
            if result is not None:
                results.append(result)
    finally:
        logs.close()
    return results


class _locked:
    """Hold the data directory's lock for the tool's run; refuse a directory in use."""

    def __init__(self, data_dir: Path) -> None:
        self.logs = LogManager(data_dir)

    def __enter__(self) -> None:
        try:
            self.logs.lock()
        except StoreError as exc:
            raise StoreError(
                f"{exc}: log dump and log verify read a stopped server's data directory; "
                "to look at a live one, copy the directory and read the copy"
            ) from None

    def __exit__(self, *exc: object) -> None:
        self.logs.release_lock()
