"""Share partitions (KIP-932): what a share group has done with each record of a partition,
as Kafka's SharePartition keeps it.

A share partition covers the offsets from its start offset (SPSO) to its end; every offset in
that window is in flight, in one of four states: AVAILABLE (to be delivered, again if its
delivery count is above 0), ACQUIRED (delivered to one member, locked until its acquisition
lock times out), ACKNOWLEDGED or ARCHIVED (done). The start offset moves past the longest run
of done records, so what lies below it is done for the group.

A fetch acquires the first AVAILABLE records of the window for a member, or, with none left,
whole batches read from the log past the window's end (batch-optimized acquisition: the last
batch read may take the count past MaxRecords; in ShareFetch v2's record-limit mode the rest
of that batch waits in the window). Offsets between batches and those of control
batches join the window ARCHIVED: no member is given them. Each acquisition adds one to a
record's delivery count; a record that comes back (its lock timed out, its member released
it) after `delivery limit` deliveries is ARCHIVED instead of AVAILABLE.

Acknowledgements are checked in full before any applies (Kafka rolls a partition's whole
request back on the first failure): Accept acknowledges, Release makes the record AVAILABLE
again, Reject and Gap archive it, Renew restarts its lock.

Sans-IO: reads come through the caller's `read(offset)` (whole batches from there); lock expiry
through the shared timer queue, whose callbacks the broker fires.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Effects
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.storage.batch import batch_info, iter_batches

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
# What each acknowledgement type makes of an acquired record (RELEASE: see _released).
_ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED}

# (first offset, last offset, delivery count): one range of records acquired alike.
AcquiredRange = tuple[int, int, int]
# (first offset, last offset, acknowledge types): one batch of acknowledgements as sent.
AckBatch = tuple[int, int, Sequence[int]]


class AckError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class InFlight:
    """One offset of the window."""

    __slots__ = ("count", "lock", "member", "state")

    def __init__(self, state: int, count: int = 0, member: str = "", lock: Any = None) -> None:
        self.state = state
        self.count = count
        self.member = member
        # The acquisition whose timer releases this record (ACQUIRED only).
        self.lock = lock


def check_ack_batches(batches: Iterable[AckBatch], max_type: int) -> str | None:
    """Kafka's validateAcknowledgementBatches: the INVALID_REQUEST message for a partition's
    malformed batches, None when they are well formed."""
    previous_last = -1
    for first, last, types in batches:
        if first > last:
            return "First offset of acknowledgement batch cannot be greater than last offset"
        if first < previous_last:
            return "Acknowledgement batches are not sorted in ascending order"
        if not types:
            return "Acknowledge types cannot be empty"
        if len(types) > 1 and len(types) != last - first + 1:
            return "Number of acknowledge types must match the number of records in the batch"
        if any(not GAP <= t <= max_type for t in types):
            return "Invalid acknowledge type"
        previous_last = last
    return None


class SharePartition:
    """One (group, topic-partition)'s delivery state."""

    def __init__(
        self, key: tuple[str, Any, int], start: int, timers: TimerQueue, delivery_limit: int
    ) -> None:
        self.key = key
        # group.share.delivery.count.limit: deliveries after which a returned record is done.
        self.delivery_limit = delivery_limit
        self.start = start
        self.end = start  # the first offset past the window
        self.records: dict[int, InFlight] = {}
        self.timers = timers
        self._locks = itertools.count()
        # Told when what a restart must keep changed (Shares keeps it: share_state.py).
        self.on_change: Callable[[SharePartition], None] | None = None

    # -- acquiring --------------------------------------------------------------------------

    def next_available(self) -> int | None:
        for offset in range(self.start, self.end):
            if self.records[offset].state == AVAILABLE:
                return offset
        return None

    def acquire(
        self,
        member: str,
        max_records: int,
        max_in_flight: int,
        lock_ms: int,
        now: int,
        log_start: int,
        read: Callable[[int], bytes],
        record_limit: bool = False,
    ) -> tuple[bytes, list[AcquiredRange]]:
        """Records for `member`: the batches read and the ranges of them it now holds. With
        `record_limit` (ShareFetch v2's record-limit mode) at most `max_records` are acquired,
        the rest of the last batch staying AVAILABLE in the window."""
        self.move_start_to(log_start)
        if max_records <= 0:
            return b"", []
        again = self.next_available()
        if again is not None:
            data = read(again)
            acquired = self._acquire_again(again, data, max_records)
        else:
            # group.share.partition.max.record.locks bounds the window, new records included.
            room = max_in_flight - (self.end - self.start)
            if room <= 0:
                return b"", []
            data = read(self.end)
            data, acquired = self._acquire_new(data, min(max_records, room))
            if record_limit:
                acquired = acquired[:max_records]
        if not acquired:
            return b"", []
        lock = (self.key, next(self._locks))
        for offset in acquired:
            entry = self.records[offset]
            entry.state, entry.member, entry.lock = ACQUIRED, member, lock
            entry.count += 1
        self.timers.schedule(lock, now + lock_ms, self._on_lock_timeout, (lock,))
        return data, _ranges(self.records, acquired)

    def _acquire_again(self, first: int, data: bytes, max_records: int) -> list[int]:
        """The AVAILABLE offsets from `first` within the batches read, up to the budget, in
        smaller pieces the more often they were delivered (Kafka 4.2's throttling, so that a
        record that keeps failing its consumer takes fewer others with it): from
        max(2, ceil(limit / 2)) deliveries a piece is the batch's size halved once more per
        delivery, and a record on its last delivery goes alone."""
        if not data:
            return []
        covered = _next_offset_after(data)
        first_batch = batch_info(data)
        batch_size = first_batch.last_offset - first_batch.base_offset + 1
        limit = self.delivery_limit
        throttle_from = max(2, -(-limit // 2))
        cap = -1
        acquired: list[int] = []
        for offset in range(first, min(covered, self.end)):
            entry = self.records[offset]
            if entry.state != AVAILABLE:
                continue
            count = entry.count
            if limit > 2 and count == limit - 1:
                if acquired:
                    break
                acquired.append(offset)  # its last delivery: alone
                break
            if count >= throttle_from and cap < 0:
                cap = max(1, batch_size >> (count - throttle_from + 1))
            acquired.append(offset)
            if len(acquired) >= max_records or len(acquired) == cap:
                break
        return acquired

    def _acquire_new(self, data: bytes, max_records: int) -> tuple[bytes, list[int]]:
        """Whole batches past the window's end join it; (the batches kept, the offsets to
        acquire). The batch that reaches the budget is the last one kept."""
        acquired: list[int] = []
        kept = 0
        for view in iter_batches(data):
            info = batch_info(view)
            if info.last_offset < self.end:
                kept += info.size
                continue
            for gap in range(self.end, info.base_offset):
                self.records[gap] = InFlight(ARCHIVED)
            first = max(info.base_offset, self.end)
            for offset in range(first, info.last_offset + 1):
                if info.is_control:
                    self.records[offset] = InFlight(ARCHIVED)
                else:
                    self.records[offset] = InFlight(AVAILABLE)
                    acquired.append(offset)
            self.end = info.last_offset + 1
            kept += info.size
            if len(acquired) >= max_records:
                break
        self._advance()
        return data[:kept], acquired

    # -- acknowledging ----------------------------------------------------------------------

    def acknowledge(self, member: str, batches: Sequence[AckBatch], lock_ms: int, now: int) -> None:
        """Apply a member's acknowledgements, all or none (AckError says why none)."""
        changes: list[tuple[InFlight, int]] = []
        for first, last, types in batches:
            if last < self.start:
                continue  # already done for the group
            for offset in range(max(first, self.start), last + 1):
                entry = self.records.get(offset)
                if entry is None:
                    if offset >= self.end and first < self.end:
                        raise AckError(
                            ErrorCode.INVALID_REQUEST,
                            "Acknowledgement batch extends past the records in flight",
                        )
                    raise AckError(ErrorCode.INVALID_RECORD_STATE, "Batch record not found")
                if entry.state != ACQUIRED:
                    raise AckError(
                        ErrorCode.INVALID_RECORD_STATE,
                        f"The record state is invalid. offset: {offset}",
                    )
                if entry.member != member:
                    raise AckError(
                        ErrorCode.INVALID_RECORD_STATE,
                        f"Member is not the owner of offset: {offset}",
                    )
                kind = types[0] if len(types) == 1 else types[offset - first]
                changes.append((entry, kind))
        renewed = None
        for entry, kind in changes:
            if kind == RENEW:
                if renewed is None:
                    renewed = (self.key, next(self._locks))
                entry.lock = renewed
            elif kind == RELEASE:
                self._released(entry)
            else:
                entry.state, entry.member, entry.lock = _ACK_STATE[kind], "", None
        if renewed is not None:
            self.timers.schedule(renewed, now + lock_ms, self._on_lock_timeout, (renewed,))
        self._advance()
        if changes:
            self._changed()

    def release(self, member: str) -> None:
        """Every record `member` holds goes back (its share session closed, its connection
        went): AVAILABLE with its delivery count kept, as Kafka 4.2 does."""
        released = False
        for entry in self.records.values():
            if entry.state == ACQUIRED and entry.member == member:
                self._released(entry)
                released = True
        self._advance()
        if released:
            self._changed()

    # -- time and the window ----------------------------------------------------------------

    def _on_lock_timeout(self, now: int, lock: Any) -> Effects:
        released = False
        for entry in self.records.values():
            if entry.state == ACQUIRED and entry.lock == lock:
                self._released(entry)
                released = True
        self._advance()
        if released:
            self._changed()
        return Effects()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def _released(self, entry: InFlight) -> None:
        entry.state = ARCHIVED if entry.count >= self.delivery_limit else AVAILABLE
        entry.member, entry.lock = "", None

    def move_start_to(self, log_start: int) -> None:
        """Records the log no longer holds are done (archived), as when retention or
        DeleteRecords moves the log start past them."""
        if log_start <= self.start:
            return
        for offset in range(self.start, min(log_start, self.end)):
            del self.records[offset]
        self.start = log_start
        self.end = max(self.end, log_start)
        self._advance()
        self._changed()

    def _advance(self) -> None:
        records = self.records
        start = self.start
        while start < self.end and records[start].state in (ACKNOWLEDGED, ARCHIVED):
            del records[start]
            start += 1
        self.start = start

    def in_flight(self) -> int:
        return self.end - self.start

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """What a restart must keep of the window, as Kafka's StateBatches: runs of records
        done, or delivered and back (AVAILABLE with their count; an ACQUIRED record is kept
        so, as its lock does not outlive a restart). Records never delivered are not listed."""
        out: list[tuple[int, int, int, int]] = []
        for offset in range(self.start, self.end):
            entry = self.records[offset]
            state = entry.state if entry.state in (ACKNOWLEDGED, ARCHIVED) else AVAILABLE
            if state == AVAILABLE and entry.count == 0:
                continue
            last = out[-1] if out else None
            if last and last[1] == offset - 1 and last[2] == state and last[3] == entry.count:
                out[-1] = (last[0], offset, state, entry.count)
            else:
                out.append((offset, offset, state, entry.count))
        return out

    def restore(self, batches: Sequence[tuple[int, int, int, int]]) -> None:
        """The window as `state_batches` kept it (at start, on a partition made at its start
        offset)."""
        for first, last, state, count in batches:
            kept = state if state in (ACKNOWLEDGED, ARCHIVED) else AVAILABLE
            for offset in range(max(first, self.start), last + 1):
                self.records[offset] = InFlight(kept, count)
            self.end = max(self.end, last + 1)
        for offset in range(self.start, self.end):
            if offset not in self.records:
                self.records[offset] = InFlight(AVAILABLE)
        self._advance()

    def done_in_flight(self) -> int:
        """Records of the window already done (Kafka's delivery-complete count)."""
        return sum(1 for e in self.records.values() if e.state in (ACKNOWLEDGED, ARCHIVED))


def _ranges(records: dict[int, InFlight], offsets: list[int]) -> list[AcquiredRange]:
    """Consecutive offsets with one delivery count, as Kafka's AcquiredRecords."""
    out: list[AcquiredRange] = []
    for offset in offsets:
        count = records[offset].count
        if out and out[-1][1] == offset - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], offset, count)
        else:
            out.append((offset, offset, count))
    return out


def _next_offset_after(data: bytes) -> int:
    last = None
    for view in iter_batches(data):
        last = view
    return batch_info(last).next_offset if last is not None else -1
