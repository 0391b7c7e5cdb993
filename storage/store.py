"""The record store interface the coordinator's shell writes through, and the in-memory store.

The shell appends a request's records before sending its reply. The in-memory store keeps
every record in order per offsets partition plus the latest value per key (what compaction
would leave); the durable log implements the same interface.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from minicoord.protocol.records import Record


class RecordStore(Protocol):
    def append(self, records: Iterable[tuple[int, Record]], timestamp: int) -> set[int]:
        """Write records (offsets partition, record); returns the partitions to sync."""

    @property
    def needs_sync(self) -> bool:
        """Whether `sync` must complete before the replies that depend on an append."""

    def sync(self, partitions: Iterable[int]) -> None:
        """Make the appended records of these partitions durable (may block)."""

    def close(self) -> None: ...


class InMemoryStore:
    def __init__(self) -> None:
        self.log: dict[int, list[Record]] = {}
        self.latest: dict[int, dict[bytes, bytes | None]] = {}

    needs_sync = False

    def append(self, records: Iterable[tuple[int, Record]], timestamp: int) -> set[int]:
        for partition, record in records:
            self.log.setdefault(partition, []).append(record)
            self.latest.setdefault(partition, {})[record.key] = record.value
        return set()

    def sync(self, partitions: Iterable[int]) -> None:
        pass

    def close(self) -> None:
        pass

    def replay(self, partition: int) -> list[Record]:
        return list(self.log.get(partition, ()))

    def live_records(self, partition: int) -> dict[bytes, bytes]:
        """Latest value per key with tombstoned keys dropped: what a compacted log holds."""
        return {k: v for k, v in self.latest.get(partition, {}).items() if v is not None}
