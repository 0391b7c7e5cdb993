"""The data path's state: every partition this node leads, and what Produce, ListOffsets,
DeleteRecords and retention do to them.

Sans-IO like the coordinator: methods are given `now` and return what to answer; the bytes a
produce accepts go into the partition's log (`PartitionLog.reserve`) and the broker makes them
durable at the end of the event-loop turn, committing them (the high watermark moves, fetches
waiting on the partition wake) before any reply that depends on them is sent. Reading and
long-polling are in fetching.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.config import Config
from minicoord.server.coordinator.results import Effects
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.fetching import FetchWaits
from minicoord.server.data.producers import ProducerIds, ProducerStates
from minicoord.server.data.validate import InvalidBatch, Limits, check_produced
from minicoord.server.topics import LEADER_EPOCH, OFFSETS_TOPIC, Topic, TopicRegistry
from minicoord.storage import producer_snapshots
from minicoord.storage.batch import TRANSACTIONAL, batch_info, encode_batch
from minicoord.storage.checkpoints import write_partition_metadata
from minicoord.storage.log import LogManager
from minicoord.storage.partition_log import PartitionLog, WriteMark
from minicoord.storage.txn_index import PartitionTxns

if TYPE_CHECKING:
    from minicoord.protocol.records import Record
    from minicoord.server.data.produce_gate import ProduceGate
    from minicoord.server.transactions.coordinator import TransactionCoordinator

log = logging.getLogger("minicoord.data")

TopicPartition = tuple[str, int]
ADMIN_CLIENT_ID = "__admin_client"

# ListOffsets' special timestamps, with the first version that may use each.
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = (
    -1,
    -2,
    -3,
    -4,
    -5,
    -6,
)
SPECIAL_TIMESTAMPS = {
    LATEST: 1,
    EARLIEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


@dataclass(slots=True)
class PartitionState:
    topic: Topic
    index: int
    log: PartitionLog
    producers: ProducerStates
    txns: PartitionTxns

    @property
    def last_stable_offset(self) -> int:
        return self.txns.first_unstable(self.log.high_watermark)


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetAnswer:
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


def leader_epoch_error(current_leader_epoch: int) -> ErrorCode | None:
    """A client's idea of the leader epoch checked against ours (-1: no check)."""
    if current_leader_epoch == -1:
        return None
    if current_leader_epoch < LEADER_EPOCH:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return None


class DataPlane:
    def __init__(
        self, config: Config, logs: LogManager, topics: TopicRegistry, timers: TimerQueue
    ) -> None:
        self.config = config
        self.logs = logs
        self.topics = topics
        self.timers = timers
        self.partitions: dict[TopicPartition, PartitionState] = {}
        # Partitions not served now, with the error their requests get: loading in the
        # background (NOT_LEADER_OR_FOLLOWER, which clients retry) or a log that could not be
        # opened (KAFKA_STORAGE_ERROR).
        self.unavailable: dict[TopicPartition, ErrorCode] = {}
        # While topic partitions load at start: the Produce requests that wait for them.
        self.produce_gate: ProduceGate | None = None
        self.producer_ids = ProducerIds()
        # Retried idempotent batches answered from the producer state (metrics, tests).
        self.duplicates = 0
        # Verifies transactional batches against their transactions: set by the broker when
        # the first transactional id comes (until then none is open anywhere).
        self.transactions: TransactionCoordinator | None = None
        self.fetch_waits = FetchWaits(timers, self)

    # -- partitions -----------------------------------------------------------------------

    def segment_bytes(self, topic: Topic) -> int:
        if topic.name == OFFSETS_TOPIC:
            return self.config.offsets_topic_segment_bytes
        return self.topics.config_of(topic).segment_bytes

    def partition(self, topic: Topic, index: int) -> PartitionState | None:
        """The partition, if it is served now (not loading)."""
        key = (topic.name, index)
        state = self.partitions.get(key)
        if (
            state is None
            and topic.internal
            and key not in self.unavailable
            and 0 <= index < topic.partitions
        ):
            # A coordinator has not written here yet: an empty log, made on first use.
            plog = self.logs.get_or_open(topic.name, index, self.segment_bytes(topic))
            state = self.install(topic, index, plog)
        return state

    def install(
        self,
        topic: Topic,
        index: int,
        plog: PartitionLog,
        producers: ProducerStates | None = None,
        txns: PartitionTxns | None = None,
    ) -> PartitionState:
        self.logs.install(topic.name, index, plog)
        state = PartitionState(
            topic, index, plog, producers or ProducerStates(), txns or PartitionTxns()
        )
        if not topic.internal:
            plog.segment_ms = self.topics.config_of(topic).roll_ms
            if plog.directory is not None:
                plog.at_boundary = partial(_snapshot_producers, plog, state.producers)
        self.partitions[(topic.name, index)] = state
        self.unavailable.pop((topic.name, index), None)
        return state

    def error_for(self, topic: Topic, index: int) -> ErrorCode:
        """Why a partition is not served now."""
        return self.unavailable.get((topic.name, index), ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def create_logs(self, topic: Topic, first: int = 0) -> None:
        """New, empty logs for partitions [first, topic.partitions) (CreateTopics and
        CreatePartitions)."""
        for index in range(first, topic.partitions):
            plog = self.logs.create_log(topic.name, index, self.segment_bytes(topic))
            if plog.directory is not None:
                write_partition_metadata(plog.directory, topic.topic_id)
            self.install(topic, index, plog)

    def drop_topic(self, topic: Topic) -> Effects:
        """A deleted topic's partitions go, and so do fetches waiting on them."""
        fx = Effects()
        for index in range(topic.partitions):
            state = self.partitions.pop((topic.name, index), None)
            if state is not None:
                fx.replies.extend(self.fetch_waits.release(state.log))
            self.unavailable.pop((topic.name, index), None)
            self.logs.delete_log(topic.name, index)
        return fx

    def apply_config(self, topic: Topic) -> None:
        """A topic's configs changed: its logs roll at the new segment size and age."""
        for index in range(topic.partitions):
            state = self.partitions.get((topic.name, index))
            if state is not None:
                state.log.segment_bytes = self.segment_bytes(topic)
                state.log.segment_ms = self.topics.config_of(topic).roll_ms

    # -- produce --------------------------------------------------------------------------

    def append(
        self,
        topic: Topic,
        index: int,
        records: bytes | None,
        now: int,
        version: int,
        client_id: str,
        transactional_id: str | None = None,
    ) -> AppendOutcome:
        """Validate and accept one partition's batch (its bytes are written at the turn's end)."""
        if topic.internal and client_id != ADMIN_CLIENT_ID:
            return AppendOutcome(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                message=f"Cannot append to internal topic {topic.name}",
            )
        state = self.partition(topic, index)
        if state is None:
            return AppendOutcome(self.error_for(topic, index))
        plog = state.log
        cfg = self.topics.config_of(topic)
        limits = Limits(
            cfg.max_message_bytes,
            self.segment_bytes(topic),
            cfg.log_append_time,
            cfg.compact,
            cfg.before_max_ms,
            cfg.after_max_ms,
            self.config.socket_request_max_bytes,
            cfg.compression,
        )
        try:
            batch, info = check_produced(records, limits, now, version)
        except InvalidBatch as exc:
            record_level = bool(exc.record_errors) or exc.error is ErrorCode.INVALID_RECORD
            return AppendOutcome(
                exc.error,
                log_start_offset=plog.log_start_offset if record_level else -1,
                message=exc.message,
                record_errors=exc.record_errors,
            )
        if info.attributes & TRANSACTIONAL:
            # As Kafka verifies (KIP-890): the batch belongs to its producer's open
            # transaction, and the transaction holds this partition.
            coordinator = self.transactions
            refusal = (
                coordinator.verify(
                    transactional_id, info.producer_id, info.producer_epoch, (topic.name, index)
                )
                if coordinator is not None
                else (ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction")
            )
            if refusal is not None:
                return AppendOutcome(
                    refusal[0], log_start_offset=plog.log_start_offset, message=refusal[1]
                )
        check = state.producers.check(info)
        if check.error is not ErrorCode.NONE:
            return AppendOutcome(
                check.error, log_start_offset=plog.log_start_offset, message=check.message
            )
        if check.duplicate is not None:
            # A retry whose answer was lost: the original's offsets, nothing appended. (Kafka
            # answers the stored batch timestamp as log_append_time here, whatever the type.)
            meta = check.duplicate
            self.duplicates += 1
            return AppendOutcome(
                ErrorCode.NONE, meta.base_offset, meta.timestamp, plog.log_start_offset
            )
        base = plog.reserve(batch, info)
        state.producers.update(info, base)
        if info.attributes & TRANSACTIONAL:
            state.txns.on_append(info, base)
        self.logs.touched(topic.name, index, plog)
        return AppendOutcome(
            ErrorCode.NONE,
            base,
            now if cfg.log_append_time else -1,
            plog.log_start_offset,
        )

    def write_marker(
        self,
        state: PartitionState,
        producer_id: int,
        epoch: int,
        commit: bool,
        now: int,
        coordinator_epoch: int = 0,
    ) -> int:
        """End the producer's transaction in this partition (Kafka's WriteTxnMarkers, as the
        coordinator of a single node writes it, at coordinator epoch 0); returns the
        marker's offset."""
        from minicoord.storage.control_batch import encode_marker

        plog = state.log
        batch = encode_marker(plog.next_offset, producer_id, epoch, commit, coordinator_epoch, now)
        base = plog.reserve(batch, batch_info(batch))
        state.producers.on_marker(producer_id, epoch, now, coordinator_epoch)
        state.txns.on_marker(producer_id, commit, base)
        state.txns.forget_before(plog.log_start_offset)
        self.logs.touched(state.topic.name, state.index, plog)
        return base

    def append_coordinator_txn(
        self,
        state: PartitionState,
        records: Sequence[Record],
        producer_id: int,
        epoch: int,
        now: int,
    ) -> int:
        """The coordinator's records in a transactional batch of the producer's
        (TxnOffsetCommit's offsets in `__consumer_offsets`): it opens the producer's
        transaction in that partition, as a producer's first batch does in a topic's, and
        the transaction's marker ends it. Returns the batch's base offset."""
        plog = state.log
        batch = encode_batch(plog.next_offset, records, now, producer_id, epoch)
        info = batch_info(batch)
        base = plog.reserve(batch, info)
        state.producers.update(info, base)
        state.txns.on_append(info, base)
        self.logs.touched(state.topic.name, state.index, plog)
        return base

    def append_records(self, state: PartitionState, records: Sequence[Record], now: int) -> int:
        """A coordinator's records in one batch (the transaction coordinator's state); returns
        its base offset."""
        base = state.log.append(records, now)
        self.logs.touched(state.topic.name, state.index, state.log)
        return base

    def committed(self, marks: Iterable[tuple[PartitionLog, WriteMark]]) -> Effects:
        """Appends made durable: move high watermarks, wake the fetches waiting on them."""
        fx = Effects()
        for plog, mark in marks:
            gained = plog.commit(mark)
            if gained:
                fx.replies.extend(self.fetch_waits.on_data(plog, gained))
        return fx

    # -- offsets --------------------------------------------------------------------------

    def list_offset(
        self,
        topic: Topic,
        index: int,
        timestamp: int,
        current_leader_epoch: int,
        version: int,
        read_committed: bool = False,
    ) -> OffsetAnswer:
        """ListOffsets for one partition; READ_COMMITTED sees only up to the last stable
        offset, as Kafka answers it."""
        error = leader_epoch_error(current_leader_epoch)
        if error is not None:
            return OffsetAnswer(error)
        if timestamp < 0 and SPECIAL_TIMESTAMPS.get(timestamp, 1 << 30) > version:
            return OffsetAnswer(ErrorCode.UNSUPPORTED_VERSION)
        state = self.partition(topic, index)
        if state is None:
            return OffsetAnswer(self.error_for(topic, index))
        plog = state.log
        end = state.last_stable_offset if read_committed else plog.high_watermark
        if timestamp == LATEST:
            return OffsetAnswer(ErrorCode.NONE, -1, end, LEADER_EPOCH)
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return OffsetAnswer(ErrorCode.NONE, -1, plog.log_start_offset, LEADER_EPOCH)
        if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            return OffsetAnswer(ErrorCode.NONE)  # no tiered storage: -1, as Kafka answers
        found = (
            plog.max_timestamp()
            if timestamp == MAX_TIMESTAMP
            else plog.offset_for_timestamp(timestamp)
        )
        if found is None or found[0] >= end:
            return OffsetAnswer(ErrorCode.NONE)
        offset, ts = found
        return OffsetAnswer(ErrorCode.NONE, ts, offset, LEADER_EPOCH)

    def end_offset_for_epoch(
        self, topic: Topic, index: int, epoch: int, current: int
    ) -> OffsetAnswer:
        """OffsetForLeaderEpoch: every batch here is of the one epoch, LEADER_EPOCH."""
        error = leader_epoch_error(current)
        if error is not None:
            return OffsetAnswer(error)
        state = self.partition(topic, index)
        if state is None:
            return OffsetAnswer(self.error_for(topic, index))
        if epoch == LEADER_EPOCH:
            return OffsetAnswer(ErrorCode.NONE, offset=state.log.next_offset, leader_epoch=epoch)
        if epoch < -1:
            # Below the first epoch: that epoch "ends" where the first one starts.
            return OffsetAnswer(ErrorCode.NONE, offset=0, leader_epoch=epoch)
        return OffsetAnswer(ErrorCode.NONE)

    def delete_records(
        self, topic: Topic, index: int, offset: int
    ) -> tuple[ErrorCode, int, str | None]:
        """DeleteRecords for one partition: (error, new low watermark, message)."""
        if topic.internal:
            return (
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                -1,
                f"Cannot delete records of internal topic {topic.name}",
            )
        cfg = self.topics.config_of(topic)
        if not cfg.delete:
            return (
                ErrorCode.POLICY_VIOLATION,
                -1,
                "Records of partitions of a compacted topic cannot be deleted",
            )
        state = self.partition(topic, index)
        if state is None:
            return self.error_for(topic, index), -1, None
        plog = state.log
        if offset == -1:
            offset = plog.high_watermark
        if offset < 0 or offset > plog.high_watermark:
            return (
                ErrorCode.OFFSET_OUT_OF_RANGE,
                -1,
                f"offset {offset} is outside [0, {plog.high_watermark}]",
            )
        if offset > plog.log_start_offset:
            plog.advance_start(offset)
            self.logs.note_start_offset(topic.name, index, offset)
            self.logs.save_start_offsets()
        return ErrorCode.NONE, plog.log_start_offset, None

    # -- retention ------------------------------------------------------------------------

    def apply_retention(self, now: int) -> int:
        """Delete what retention.ms / retention.bytes expire; returns segments deleted."""
        deleted = 0
        for (name, index), state in list(self.partitions.items()):
            topic = state.topic
            if topic.internal:
                continue
            cfg = self.topics.config_of(topic)
            if not cfg.delete:
                continue
            dropped = state.log.apply_retention(now, cfg.retention_ms, cfg.retention_bytes)
            if dropped:
                deleted += len(dropped)
                self.logs.note_start_offset(name, index, state.log.log_start_offset)
                log.info(
                    "retention deleted %d segments of %s-%d; log start offset now %d",
                    len(dropped),
                    name,
                    index,
                    state.log.log_start_offset,
                )
        if deleted:
            self.logs.save_start_offsets()
        return deleted

    def expire_producers(self, now: int) -> int:
        """Forget idempotent producers silent for producer.id.expiration.ms, in every
        partition; returns how many partition entries went."""
        expiration_ms = self.config.producer_id_expiration_ms
        expired = sum(s.producers.expire(now, expiration_ms) for s in self.partitions.values())
        if expired:
            log.debug("forgot %d expired producer states", expired)
        return expired


def _snapshot_producers(plog: PartitionLog, producers: ProducerStates, offset: int) -> None:
    """A producer snapshot at a roll or a clean close, as Kafka writes one (a partition whose
    producers are all plain writes none)."""
    entries = producers.snapshot()
    if not entries or plog.directory is None:
        return
    try:
        producer_snapshots.write(plog.directory, offset, entries)
    except OSError as exc:
        # Only advice for a restart: the batches still hold what they hold.
        log.warning("%s: producer snapshot at offset %d not written: %s", plog.name, offset, exc)
