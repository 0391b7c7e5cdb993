"""Idempotent producers: each partition's producer state, and producer id allocation.

Kafka's rules (ProducerStateManager / ProducerAppendInfo), kept per partition:
- A producer is known by its id and epoch; the partition remembers the metadata of its last
  five batches (the most a producer has in flight with idempotence on).
- A batch equal to one of those five (same epoch, first and last sequence) is a retry whose
  answer was lost: it is answered with the original base offset and not appended again.
- An older epoch than the partition has seen is INVALID_PRODUCER_EPOCH (the producer was
  replaced). A newer epoch must start again at sequence 0.
- Otherwise the batch's first sequence must follow the last one (wrapping at 2^31 - 1), or it
  is OUT_OF_ORDER_SEQUENCE_NUMBER. A producer the partition knows nothing about (it never
  wrote here, or retention removed its batches) may start at any sequence.
The state is rebuilt when a log is opened, so a restart dedups retries of batches written
before it and still refuses a replaced producer's epoch: from the latest snapshot (written at
each roll and at a clean shutdown, as Kafka writes them) and the batch headers in the log,
since retention and compaction may have removed a producer's batches but not its state.
"""

from __future__ import annotations

from collections import deque
from dataclasses import field

from minicoord.protocol import metadata_records as mr
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.storage.batch import NO_PRODUCER_ID, NO_SEQUENCE, BatchInfo
from minicoord.storage.producer_snapshots import SnapshotEntry

INT32_MAX = 2**31 - 1
# Batches a producer may have in flight with idempotence on; Kafka caches as many per producer.
CACHED_BATCHES = 5


def last_sequence(first_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence number; sequences wrap from 2^31 - 1 to 0."""
    if first_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - first_sequence) - 1
    return first_sequence + last_offset_delta


def in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset_delta: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    # The coordinator epoch of the producer's last transaction marker here (-1: none yet),
    # as DescribeProducers reports it. This node's coordinator writes its markers at 0.
    coordinator_epoch: int = -1
    # The timestamp of its last batch or transaction marker here (Kafka's
    # ProducerStateEntry.lastTimestamp, which a marker sets too): what DescribeProducers
    # reports and what the producer expires by.
    last_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """What to do with a batch: append it, answer it as a duplicate, or refuse it."""

    error: ErrorCode
    duplicate: BatchMeta | None = None
    message: str | None = None


ACCEPT = SequenceCheck(ErrorCode.NONE)


class ProducerStates:
    """One partition's producers."""

    __slots__ = ("producers",)

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, info: BatchInfo) -> SequenceCheck:
        """Decide on a produced batch (a producer id, or none for a plain producer)."""
        pid = info.producer_id
        if pid == NO_PRODUCER_ID:
            return ACCEPT
        first = info.base_sequence
        if first == NO_SEQUENCE:
            return SequenceCheck(
                ErrorCode.INVALID_RECORD, message="a batch with a producer id needs a sequence"
            )
        entry = self.producers.get(pid)
        if entry is None:
            return ACCEPT
        epoch = info.producer_epoch
        last = last_sequence(first, info.last_offset_delta)
        if epoch == entry.epoch:
            for meta in entry.batches:
                if meta.first_sequence == first and meta.last_sequence == last:
                    return SequenceCheck(ErrorCode.NONE, duplicate=meta)
        if epoch < entry.epoch:
            return SequenceCheck(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                message=f"producer {pid} epoch {epoch} is older than its current {entry.epoch}",
            )
        if epoch > entry.epoch:
            if first != 0:
                return SequenceCheck(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    message=f"producer {pid}'s new epoch {epoch} starts at sequence {first}, not 0",
                )
            return ACCEPT
        if entry.batches and not in_sequence(entry.last_sequence, first):
            return SequenceCheck(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                message=f"producer {pid} sent sequence {first} after {entry.last_sequence}",
            )
        return ACCEPT

    def update(self, info: BatchInfo, base_offset: int) -> None:
        """Remember an appended batch (also called for every batch when a log is opened)."""
        pid = info.producer_id
        if pid == NO_PRODUCER_ID or info.base_sequence == NO_SEQUENCE:
            return
        entry = self.producers.get(pid)
        if entry is None or info.producer_epoch != entry.epoch:
            # A new producer, or a new epoch (which starts its sequence afresh).
            if entry is not None and info.producer_epoch < entry.epoch:
                return
            coordinator_epoch = entry.coordinator_epoch if entry is not None else -1
            entry = self.producers[pid] = ProducerEntry(info.producer_epoch)
            entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = info.max_timestamp
        entry.batches.append(
            BatchMeta(
                info.base_sequence,
                last_sequence(info.base_sequence, info.last_offset_delta),
                base_offset,
                info.last_offset_delta,
                info.max_timestamp,
            )
        )

    def on_marker(
        self, producer_id: int, epoch: int, timestamp: int, coordinator_epoch: int = 0
    ) -> None:
        """A transaction marker of the producer's, written at `timestamp`: its epoch is the
        partition's from now on, so a producer the coordinator fenced (an epoch bumped to
        abort) is refused here too, and its last timestamp is the marker's, as Kafka's
        ProducerAppendInfo.appendEndTxnMarker updates it."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp

    def expire(self, now: int, expiration_ms: int) -> int:
        """Forget the producers whose last batch or marker is `expiration_ms` old (Kafka's
        ProducerStateManager.removeExpiredProducers, by its last timestamp as Kafka keeps it:
        a batch's max timestamp, a marker's own); returns how many. A forgotten producer is
        unknown again: its next batch may carry any sequence, and a retry of an old batch is
        appended anew."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def load(self, info: BatchInfo) -> None:
        """Replay one batch header found in the log (its base offset is already assigned)."""
        if info.is_control:
            self.on_marker(info.producer_id, info.producer_epoch, info.max_timestamp)
        else:
            self.update(info, info.base_offset)

    def snapshot(self) -> list[SnapshotEntry]:
        """Each producer as Kafka's snapshot keeps it: its epoch and its last batch."""
        out = []
        for pid, entry in self.producers.items():
            if entry.batches:
                last = entry.batches[-1]
                out.append(
                    SnapshotEntry(
                        pid,
                        entry.epoch,
                        last.last_sequence,
                        last.base_offset + last.last_offset_delta,
                        last.last_offset_delta,
                        entry.last_timestamp,
                    )
                )
        return out

    def merge_snapshot(self, offset: int, entries: list[SnapshotEntry]) -> None:
        """Take in a snapshot complete up to `offset`, after the log's surviving batches were
        loaded. A producer whose last surviving batch lies at or past `offset` is as those
        batches say (they all survive: nothing past the last roll is cleaned); any other is
        as the snapshot says, which knew every batch before `offset`, removed since or not."""
        for e in entries:
            entry = self.producers.get(e.producer_id)
            if entry is not None and entry.batches:
                last = entry.batches[-1]
                if last.base_offset >= offset or (
                    entry.epoch == e.epoch and last.last_sequence == e.last_sequence
                ):
                    continue  # the batches know as much, and keep more of them
            first = e.last_sequence - e.offset_delta
            if first < 0:
                first += INT32_MAX + 1  # the batch's sequences wrapped
            restored = self.producers[e.producer_id] = ProducerEntry(e.epoch)
            restored.last_timestamp = e.timestamp
            restored.batches.append(
                BatchMeta(
                    first,
                    e.last_sequence,
                    e.last_offset - e.offset_delta,
                    e.offset_delta,
                    e.timestamp,
                )
            )


class ProducerIds:
    """Producer ids handed out by InitProducerId, never twice, restarts included.

    Ids come from blocks claimed durably (a ProducerIdsRecord in the cluster metadata log,
    as Kafka's controller does) before any id of a block is given out.
    """

    BLOCK = 1000

    def __init__(self, next_block_start: int = 0) -> None:
        self.next_block_start = next_block_start
        self._next = next_block_start
        self._end = next_block_start

    def needs_block(self) -> bool:
        return self._next >= self._end

    def claim_block(self) -> int:
        """Claim the next block; the caller persists `next_block_start` before using it."""
        self._next = self.next_block_start
        self._end = self.next_block_start + self.BLOCK
        self.next_block_start = self._end
        return self.next_block_start

    def block_record(self, broker_id: int) -> bytes:
        """The ProducerIdsRecord of the blocks claimed so far, as Kafka's controller writes it."""
        record = mr.ProducerIdsRecord(
            broker_id=broker_id, broker_epoch=-1, next_producer_id=self.next_block_start
        )
        return mr.encode(record)

    def restore(self, next_block_start: int) -> None:
        """A claimed block found in the metadata log: ids below it are spent."""
        self.next_block_start = max(self.next_block_start, next_block_start)
        self._next = self._end = self.next_block_start

    def allocate(self) -> int:
        assert not self.needs_block()
        pid = self._next
        self._next += 1
        return pid
