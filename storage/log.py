"""The durable `__consumer_offsets` store: one PartitionLog per offsets partition.

The broker hands it every record of a group of requests at once (group commit): one batch
per touched partition is written with a single write() each; under the `fsync` policy the
touched partitions are then fsync'd (off the event loop) before any reply of the group is
released. What each policy promises:

- `write` (default): records are written to the OS before the reply, so an acknowledged
  commit survives the process being killed (not a power loss).
- `fsync`: records are fsync'd before the reply: an acknowledged commit survives power loss.
- `none`: records are buffered in the process and written about once a second or on a clean
  shutdown; a killed process loses what was still buffered. Fastest; promises nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable, Iterator
from enum import Enum
from pathlib import Path

from minicoord.protocol.records import Record
from minicoord.storage.batch import StoredRecord
from minicoord.storage.partition_log import PartitionLog, partition_dir, partitions_in

log = logging.getLogger("minicoord.storage")


class StoreError(Exception):
    pass


class FlushPolicy(Enum):
    WRITE = "write"
    FSYNC = "fsync"
    NONE = "none"


class DurableStore:
    def __init__(
        self,
        data_dir: Path,
        num_partitions: int,
        policy: FlushPolicy = FlushPolicy.WRITE,
        segment_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.data_dir = data_dir
        self.num_partitions = num_partitions
        self.policy = policy
        self.segment_bytes = segment_bytes
        self.logs: dict[int, PartitionLog] = {}
        # Under `none`, records waiting for the periodic write, per partition.
        self._buffered: dict[int, list[tuple[Record, int]]] = {}
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the data directory for this process; a second server on it would corrupt it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(f"{self.data_dir} is in use by another minicoord process") from None
        self._lock_fd = fd

    def partitions_on_disk(self) -> list[int]:
        found = partitions_in(self.data_dir)
        beyond = [p for p in found if p >= self.num_partitions]
        if beyond:
            # Group -> partition mapping depends on the partition count; a log written with
            # more partitions would put groups where no request would look for them.
            raise StoreError(
                f"{self.data_dir} holds offsets partition {max(beyond)} but "
                f"offsets.topic.num.partitions is {self.num_partitions}"
            )
        return sorted(found)

    @property
    def needs_sync(self) -> bool:
        return self.policy is FlushPolicy.FSYNC

    def open_partition(self, partition: int) -> PartitionLog:
        """Open (verifying, maybe truncating) one partition's log; CorruptLog if it cannot be."""
        plog = PartitionLog(partition_dir(self.data_dir, partition), partition, self.segment_bytes)
        plog.open()
        self.logs[partition] = plog
        return plog

    def replay(self, partition: int) -> Iterator[StoredRecord]:
        return self.logs[partition].read()

    def append(self, records: Iterable[tuple[int, Record]], timestamp: int) -> set[int]:
        """Write records, one batch per partition; returns the partitions written to the OS."""
        by_partition: dict[int, list[Record]] = {}
        for partition, record in records:
            by_partition.setdefault(partition, []).append(record)
        if self.policy is FlushPolicy.NONE:
            for partition, batch in by_partition.items():
                self._buffered.setdefault(partition, []).extend((r, timestamp) for r in batch)
            return set()
        for partition, batch in by_partition.items():
            self._log(partition).append(batch, timestamp)
        return set(by_partition)

    def sync(self, partitions: Iterable[int]) -> None:
        """fsync the given partitions (blocking: the broker runs this off the event loop)."""
        for partition in partitions:
            self.logs[partition].flush()

    def write_buffered(self) -> None:
        """Under `none`: write what is buffered (the periodic flush, and at shutdown)."""
        buffered, self._buffered = self._buffered, {}
        for partition, entries in buffered.items():
            # Records keep the timestamp of the request that made them; a batch has one, so
            # consecutive runs with the same timestamp share a batch.
            run: list[Record] = []
            run_ts = None
            for record, ts in entries:
                if run and ts != run_ts:
                    self._log(partition).append(run, run_ts or 0)
                    run = []
                run.append(record)
                run_ts = ts
            if run:
                self._log(partition).append(run, run_ts or 0)

    def _log(self, partition: int) -> PartitionLog:
        plog = self.logs.get(partition)
        if plog is None:
            plog = self.open_partition(partition)
        return plog

    def close(self) -> None:
        self.write_buffered()
        for plog in self.logs.values():
            plog.flush()
            plog.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.logs.values())
