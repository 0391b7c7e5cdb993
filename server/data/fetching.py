"""Fetch: reading partitions, and holding a fetch until data arrives (Kafka's DelayedFetch).

A read takes whole batches from the one holding each partition's fetch offset, bounded by
the high watermark, the partition's limit and what is left of the request's `max_bytes`.
The first partition that has data always gets its first batch whole, even past both limits,
so a consumer can always make progress (KIP-74); a later partition whose first batch does
not fit gets nothing this time.

A fetch that finds less than `min_bytes` waits (a parked reply) until its partitions hold at
least that many readable bytes from its fetch offsets (what it already found counts, each
partition at most its limit), or `max_wait_ms` passes on the shared timers; either way the
partitions are read again and answered. As Kafka's DelayedFetch, a fetch whose offset lies in
an older segment than the high watermark's (a consumer catching up) does not wait: the next
segment's data is there to read. Nothing polls: the broker tells `on_data` how many bytes
each commit made visible.
"""

from __future__ import annotations

from collections import deque
from dataclasses import field
from typing import TYPE_CHECKING, Any

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.coordinator.results import Effects, Ticket
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.topics import Topic
from minicoord.storage.batch import batch_info, iter_batches
from minicoord.storage.partition_log import PartitionLog

if TYPE_CHECKING:
    from minicoord.server.data.plane import DataPlane


@dataclass(slots=True)
class FetchPartition:
    """One partition a fetch asks for; `topic` None when it names an unknown topic."""

    topic: Topic | None
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class PartitionData:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    # read_committed: (producer id, first offset) of the aborted transactions read.
    aborted: list[tuple[int, int]] | None = None


def read_partitions(
    plane: DataPlane,
    wanted: list[FetchPartition],
    max_bytes: int,
    unknown: ErrorCode,
    read_committed: bool = False,
) -> tuple[list[PartitionData], int, bool]:
    """(per-partition answers, bytes read, whether any partition errored). read_committed
    reads below the last stable offset and names the aborted transactions it read into."""
    from minicoord.server.data.plane import leader_epoch_error

    out: list[PartitionData] = []
    remaining = max_bytes
    min_one = True
    total = 0
    errored = False
    for p in wanted:
        topic = p.topic
        if topic is None or not 0 <= p.index < topic.partitions:
            out.append(
                PartitionData(unknown if topic is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            )
            errored = True
            continue
        error = leader_epoch_error(p.current_leader_epoch)
        state = plane.partition(topic, p.index) if error is None else None
        if state is None:
            if error is None and plane.topics.get(topic.name) is not topic:
                # Deleted while this fetch waited: Kafka's DelayedFetch re-reads the partition
                # and finds no such topic (ReplicaManager.getPartitionOrError), at any version:
                # UNKNOWN_TOPIC_OR_PARTITION, not "not the leader".
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.append(PartitionData(error or plane.error_for(topic, p.index)))
            errored = True
            continue
        plog = state.log
        offset = p.fetch_offset
        if offset < plog.log_start_offset or offset > plog.next_offset:
            out.append(PartitionData(ErrorCode.OFFSET_OUT_OF_RANGE))
            errored = True
            continue
        hw = plog.high_watermark
        txns = state.txns
        lso = txns.first_unstable(hw) if txns.open else hw
        upto = lso if read_committed else None
        data = (
            plog.read(offset, min(p.max_bytes, remaining), min_one, upto)
            if remaining or min_one
            else b""
        )
        aborted = None
        if data:
            min_one = False
            remaining = max(0, remaining - len(data))
            total += len(data)
            if read_committed and txns.aborted:
                aborted = txns.aborted_between(offset, next_offset_after(data))
        out.append(PartitionData(ErrorCode.NONE, hw, lso, plog.log_start_offset, data, aborted))
    return out, total, errored


def next_offset_after(data: bytes) -> int:
    """The offset after the last of these whole batches."""
    (last,) = deque(iter_batches(data), maxlen=1)
    return batch_info(last).next_offset


class WaitedLog:
    """What a waiting fetch reads of one log: from `offset`, which lay in the segment based
    at `segment` when it parked; `counted` readable bytes so far, at most `limit` (the
    partition's max_bytes)."""

    __slots__ = ("counted", "limit", "offset", "segment")

    def __init__(self, plog: PartitionLog, offset: int, limit: int, counted: int) -> None:
        self.offset = offset
        self.segment = plog.segment_base(offset)
        self.limit = limit
        self.counted = min(counted, limit)

    def on_older_segment(self, plog: PartitionLog) -> bool:
        """Kafka's DelayedFetch case F: the high watermark has moved past the segment the
        fetch offset lies in (the fetch is behind, or the log rolled under it)."""
        return self.offset < plog.high_watermark and self.segment != (
            plog.high_watermark_segment_base
        )


@dataclass(eq=False, slots=True)
class FetchWait:
    ticket: Ticket
    min_bytes: int
    logs: dict[PartitionLog, WaitedLog] = field(default_factory=dict)
    accumulated: int = 0


class FetchWaits:
    """Fetches waiting for data, by the logs they read."""

    def __init__(self, timers: TimerQueue, plane: Any) -> None:
        self.timers = timers
        self.plane = plane
        self._by_log: dict[PartitionLog, set[FetchWait]] = {}

    def __len__(self) -> int:
        return len({w for waits in self._by_log.values() for w in waits})

    def park(
        self, ticket: Ticket, logs: dict[PartitionLog, WaitedLog], min_bytes: int, deadline: int
    ) -> FetchWait:
        """Hold a fetch until its logs hold `min_bytes` for it or `deadline` passes; then the
        ticket is resolved (with None) and the fetch is read again."""
        wait = FetchWait(ticket, min_bytes, logs, sum(w.counted for w in logs.values()))
        for plog in logs:
            self._by_log.setdefault(plog, set()).add(wait)
        self.timers.schedule(wait, deadline, self._on_timeout, (wait,))
        return wait

    def on_data(self, plog: PartitionLog, gained: int) -> list[tuple[Ticket, Any]]:
        """`gained` bytes became readable in `plog`: release the fetches that now have enough."""
        waits = self._by_log.get(plog)
        if not waits:
            return []
        ready = []
        for wait in list(waits):
            waited = wait.logs[plog]
            counted = min(waited.counted + gained, waited.limit)
            wait.accumulated += counted - waited.counted
            waited.counted = counted
            if wait.accumulated >= wait.min_bytes or waited.on_older_segment(plog):
                self._forget(wait)
                ready.append((wait.ticket, None))
        return ready

    def release(self, plog: PartitionLog) -> list[tuple[Ticket, Any]]:
        """Answer every fetch waiting on a log now (its topic was deleted)."""
        ready = []
        for wait in list(self._by_log.get(plog, ())):
            self._forget(wait)
            ready.append((wait.ticket, None))
        return ready

    def _on_timeout(self, now: int, wait: FetchWait) -> Effects:
        fx = Effects()
        self._forget(wait)
        fx.reply(wait.ticket, None)
        return fx

    def _forget(self, wait: FetchWait) -> None:
        self.timers.cancel(wait)
        for plog in wait.logs:
            waits = self._by_log.get(plog)
            if waits is not None:
                waits.discard(wait)
                if not waits:
                    del self._by_log[plog]
