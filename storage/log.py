"""Every log of the node: one PartitionLog per topic partition, on disk or in memory.

`__consumer_offsets` partitions, user topics and the cluster metadata log are all logs here,
in Kafka's layout (`DIR/TOPIC-PARTITION/00000000000000000000.log`). The broker accepts
batches into logs as requests arrive; at the end of each event-loop turn it asks this manager
to make them as durable as the flush policy promises (group commit: one write per touched
segment), then commits them (consumers may read them) and releases the replies:

- `write` (default): written to the OS before the reply: an acknowledged commit or message
  survives the process being killed (not a power loss).
- `fsync`: fsync'd before the reply (off the event loop): survives power loss too.
- `none`: kept in the process and written about once a second or at a clean shutdown; a
  killed process loses what was still buffered. Readers see it at once either way.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING

from minicoord.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offsets, write_offsets
from minicoord.storage.partition_log import PartitionLog, WriteMark
from minicoord.storage.scan import BatchCallback

if TYPE_CHECKING:
    # For annotations only: pathlib (with urllib.parse and ipaddress behind it) is a good
    # share of the start-up of a server that keeps its logs in memory and never needs a path.
    from pathlib import Path

log = logging.getLogger("minicoord.storage")

OFFSETS_TOPIC = "__consumer_offsets"
_LOG_DIR = re.compile(r"(.+)-(\d+)")

TopicPartition = tuple[str, int]


class StoreError(Exception):
    pass


class FlushPolicy(Enum):
    WRITE = "write"
    FSYNC = "fsync"
    NONE = "none"


def log_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return data_dir / f"{topic}-{partition}"


def logs_in(data_dir: Path) -> list[TopicPartition]:
    """The topic partitions that have a log directory under data_dir."""
    found = []
    for entry in data_dir.iterdir() if data_dir.is_dir() else ():
        match = _LOG_DIR.fullmatch(entry.name)
        if match and entry.is_dir():
            found.append((match.group(1), int(match.group(2))))
    return sorted(found)


class LogManager:
    def __init__(self, data_dir: Path | None, policy: FlushPolicy = FlushPolicy.WRITE) -> None:
        """Logs under `data_dir`, or in memory when it is None."""
        self.data_dir = data_dir
        self.policy = policy
        self.logs: dict[TopicPartition, PartitionLog] = {}
        # Logs with batches accepted since the last flush, and (policy none) those whose
        # bytes are still only in the process.
        self._touched: dict[TopicPartition, PartitionLog] = {}
        self._buffered: dict[TopicPartition, PartitionLog] = {}
        self._lock_fd: int | None = None
        # (device, inode) of the data directory this process locked.
        self._locked_dir: tuple[int, int] | None = None
        self._start_offsets: dict[TopicPartition, int] = {}
        self._start_offsets_saved: dict[TopicPartition, int] = {}

    @property
    def in_memory(self) -> bool:
        return self.data_dir is None

    def lock(self) -> None:
        """Take the data directory for this process; a second server on it would corrupt it."""
        if self.data_dir is None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # The holder wrote its pid there, so the refusal can name the process to stop.
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            if holder == str(os.getpid()):
                raise StoreError(
                    f"{self.data_dir} is in use by another server of this process (stop it first)"
                ) from None
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise StoreError(
                f"{self.data_dir} is in use by another minicoord process{who} (stop it first)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        held = os.stat(self.data_dir)
        self._locked_dir = (held.st_dev, held.st_ino)
        self._start_offsets = self._read_start_offsets()
        self._start_offsets_saved = dict(self._start_offsets)

    def cluster_id(self, proposed: str, node_id: int) -> str:
        """The cluster id of the data directory: the one in its meta.properties, or `proposed`,
        written there for every later start (Kafka keeps it so; clients that see it change
        take the broker for another cluster). In memory, `proposed`."""
        if self.data_dir is None:
            return proposed
        from minicoord.storage.checkpoints import read_meta_properties, write_meta_properties

        path = self.data_dir / "meta.properties"
        try:
            stored = read_meta_properties(self.data_dir)
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read {path}: {exc}") from None
        if not stored and not path.exists():
            write_meta_properties(self.data_dir, proposed, node_id)
            return proposed
        # One that is there but unreadable is refused, as Kafka refuses it: making a new id
        # would quietly make this directory another cluster.
        if stored.get("version") not in ("0", "1"):
            raise StoreError(
                f"{path}: version {stored.get('version')!r} is not 0 or 1 (restore the file, "
                "or remove it to give the directory a new cluster id)"
            )
        if not stored.get("cluster.id"):
            raise StoreError(
                f"{path} has no cluster.id (restore the file, or remove it to give the "
                "directory a new cluster id)"
            )
        if stored.get("node.id", str(node_id)) != str(node_id):
            # As Kafka refuses a log directory written by another node.
            raise StoreError(
                f"{self.data_dir} belongs to node {stored['node.id']} (its meta.properties), "
                f"not to broker.id={node_id}"
            )
        return stored["cluster.id"]

    def _check_still_there(self) -> None:
        """FileNotFoundError if the locked data directory was removed or moved away: a new log
        made at its old path would come back empty, without the rest, at the next start."""
        if self._locked_dir is None or self.data_dir is None:
            return
        try:
            found = os.stat(self.data_dir)
        except FileNotFoundError:
            found = None
        if found is None or (found.st_dev, found.st_ino) != self._locked_dir:
            raise FileNotFoundError(
                errno.ENOENT, "the data directory was removed or replaced", str(self.data_dir)
            )

    def release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
            self._locked_dir = None

    def on_disk(self) -> list[TopicPartition]:
        return logs_in(self.data_dir) if self.data_dir is not None else []

    # -- opening, creating, deleting ---------------------------------------------------------

    def open_log(
        self,
        topic: str,
        partition: int,
        segment_bytes: int,
        on_batch: BatchCallback | None = None,
    ) -> PartitionLog:
        """Open (verifying, maybe truncating) a log, creating it if absent; CorruptLog if it
        cannot be. Blocking: the loader runs it in a worker thread, then `install`s the log."""
        directory = None if self.data_dir is None else log_dir(self.data_dir, topic, partition)
        self._check_still_there()
        plog = PartitionLog(
            directory,
            f"{topic}-{partition}",
            segment_bytes,
            self._start_offsets.get((topic, partition), 0),
        )
        plog.open(on_batch)
        return plog

    def install(self, topic: str, partition: int, plog: PartitionLog) -> None:
        self.logs[(topic, partition)] = plog

    def create_log(self, topic: str, partition: int, segment_bytes: int) -> PartitionLog:
        """A new, empty log (CreateTopics, CreatePartitions); any leftover directory goes."""
        if self.data_dir is not None:
            stale = log_dir(self.data_dir, topic, partition)
            if stale.exists():
                PartitionLog(stale, "", segment_bytes).delete()
        self._start_offsets.pop((topic, partition), None)
        plog = self.open_log(topic, partition, segment_bytes)
        self.install(topic, partition, plog)
        return plog

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_open(self, topic: str, partition: int, segment_bytes: int) -> PartitionLog:
        plog = self.logs.get((topic, partition))
        if plog is None:
            plog = self.open_log(topic, partition, segment_bytes)
            self.install(topic, partition, plog)
        return plog

    def delete_log(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        plog = self.logs.pop(key, None)
        self._touched.pop(key, None)
        self._buffered.pop(key, None)
        if plog is None and self.data_dir is not None:
            plog = PartitionLog(log_dir(self.data_dir, topic, partition), "", 1)
        if plog is not None:
            plog.delete()
        if self._start_offsets.pop(key, None) is not None:
            self.save_start_offsets()

    # -- the write path ----------------------------------------------------------------------

    def touched(self, topic: str, partition: int, plog: PartitionLog) -> None:
        """A batch was accepted into this log in the current turn."""
        self._touched[(topic, partition)] = plog

    @property
    def has_touched(self) -> bool:
        return bool(self._touched)

    @property
    def needs_sync(self) -> bool:
        return self.policy is FlushPolicy.FSYNC

    def write_out(self) -> list[tuple[PartitionLog, WriteMark]]:
        """Write (or, under `none`, only mark) what this turn accepted; the marks to commit
        once durable."""
        touched, self._touched = self._touched, {}
        if self.policy is FlushPolicy.NONE and self.data_dir is not None:
            self._buffered.update(touched)
            return [(plog, plog.mark()) for plog in touched.values()]
        return [(plog, plog.write_out()) for plog in touched.values()]

    @staticmethod
    def sync(marks: Iterable[tuple[PartitionLog, WriteMark]]) -> None:
        """fsync what the marks cover (blocking: the broker runs this off the event loop)."""
        for plog, mark in marks:
            plog.sync(mark)

    def write_buffered(self) -> None:
        """Under `none`: hand what is buffered to the OS (the periodic flush, and at shutdown)."""
        buffered, self._buffered = self._buffered, {}
        for plog in buffered.values():
            plog.write_out()

    # -- log start offsets -------------------------------------------------------------------

    def note_start_offset(self, topic: str, partition: int, offset: int) -> None:
        """Remember a log start offset moved by DeleteRecords or retention."""
        self._start_offsets[(topic, partition)] = offset

    def save_start_offsets(self) -> None:
        if self.data_dir is None or self._start_offsets == self._start_offsets_saved:
            return
        write_offsets(self.data_dir / LOG_START_OFFSET_CHECKPOINT, self._start_offsets)
        self._start_offsets_saved = dict(self._start_offsets)

    def _read_start_offsets(self) -> dict[TopicPartition, int]:
        assert self.data_dir is not None
        try:
            return read_offsets(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        except ValueError as exc:
            # Losing it only re-exposes records below a deleted point; refusing to start
            # over it would be worse. Say so.
            log.error("ignoring %s", exc)
            return {}

    # -- shutdown ----------------------------------------------------------------------------

    def close(self) -> None:
        self.write_buffered()
        for plog in self.logs.values():
            plog.flush()
            plog.close()
        self.save_start_offsets()
        self.release_lock()

    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.logs.values())
