"""The transaction coordinator's rules (Kafka's TransactionCoordinator, transaction version 1).

Sans-IO: each call is given the time and returns an error code and, when a transaction is to
end, what ends (`Ended`). Ending takes Kafka's two steps: the transaction moves to
PrepareCommit or PrepareAbort, which the shell makes durable first; then it writes the markers
to the transaction's partitions (a group's offsets partition among them) and, once those are
durable, `complete` moves it to CompleteCommit or CompleteAbort. Meanwhile requests for the id
get CONCURRENT_TRANSACTIONS, which clients retry. A crash between the steps loses nothing:
the restarted coordinator finds the transaction prepared and writes its markers again.

Every change of an id's state is named in `changed`; the shell writes each as a
`__transaction_state` record (TransactionLogKey/Value, `record`), in the partition Kafka would
(`partition_for`), and `load` rebuilds the state from those records at start, so ids, epochs
and open transactions survive a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.coordinator.partitioning import partition_for

TopicPartition = tuple[str, int]

# Kafka's names for the states, as DescribeTransactions and ListTransactions report them.
EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARE_COMMIT = "PrepareCommit"
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"
# Between the two steps of ending: the markers are being written.
ENDING = (PREPARE_COMMIT, PREPARE_ABORT)
OPEN = (ONGOING, PREPARE_COMMIT, PREPARE_ABORT)

# An epoch is an int16; past this one the coordinator moves the id to a new producer id.
MAX_EPOCH = 32766

_NONE = ErrorCode.NONE


@dataclass(slots=True)
class Txn:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    # The id and epoch before the latest InitProducerId: a retry of it (KIP-360) names these.
    last_producer_id: int = -1
    last_epoch: int = -1
    # Its partitions, a group's `__consumer_offsets` partition among them once AddOffsetsToTxn
    # added the group (as Kafka records it).
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1


@dataclass(frozen=True, slots=True)
class Ended:
    """A transaction the shell must finish: its markers, with this producer id and epoch."""

    transactional_id: str
    producer_id: int
    epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class InitOutcome:
    error: ErrorCode
    producer_id: int = -1
    epoch: int = -1
    # An open transaction the call fenced: aborted before the answer (to retry).
    aborted: Ended | None = None


class TransactionCoordinator:
    def __init__(
        self,
        max_timeout_ms: int,
        new_producer_id: Callable[[], int],
        id_expiration_ms: int = 604_800_000,
        num_partitions: int = 50,
    ) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.new_producer_id = new_producer_id
        self.id_expiration_ms = id_expiration_ms
        self.num_partitions = num_partitions
        self.txns: dict[str, Txn] = {}
        # The ids whose state changed since the shell last wrote them (a removed one: its
        # tombstone).
        self.changed: dict[str, None] = {}
        # `__transaction_state` partitions whose log could not be read: their ids are refused.
        self.unavailable: set[int] = set()
        # While the server's logs load at start: every id is refused (loading.py).
        self.loading = False

    def partition_for(self, tid: str) -> int:
        """The id's `__transaction_state` partition: Kafka's partitionFor."""
        return partition_for(tid, self.num_partitions)

    def refused(self, tid: str) -> ErrorCode | None:
        """COORDINATOR_LOAD_IN_PROGRESS while the logs load; COORDINATOR_NOT_AVAILABLE for an
        id whose partition could not be loaded."""
        if self.unavailable and self.partition_for(tid) in self.unavailable:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # -- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(
        self, tid: str, timeout_ms: int, producer_id: int, epoch: int, now: int
    ) -> InitOutcome:
        """An id and epoch for the transactional id, fencing any earlier producer of it.
        `producer_id`/`epoch` are the caller's current ones (KIP-360, v3+), or -1."""
        refused = self.refused(tid)
        if refused is not None:
            return InitOutcome(refused)
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitOutcome(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(tid)
        if txn is None:
            txn = self.txns[tid] = Txn(tid, self.new_producer_id(), 0, timeout_ms)
            txn.update_ms = now
            self.changed[tid] = None
            return InitOutcome(_NONE, txn.producer_id, 0)
        if txn.state in ENDING:
            return InitOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id != -1:
            if producer_id == txn.last_producer_id and epoch == txn.last_epoch:
                # A retry whose answer was lost: answered again, no second bump.
                if txn.state != ONGOING:
                    return InitOutcome(_NONE, txn.producer_id, txn.epoch)
            elif producer_id != txn.producer_id or epoch != txn.epoch:
                return InitOutcome(ErrorCode.PRODUCER_FENCED)
        if txn.state == ONGOING:
            # The open transaction of the producer being fenced is aborted under a bumped
            # epoch (Kafka's PrepareEpochFence, then PrepareAbort), its markers under the
            # producer id its batches carry, and, as Kafka does, the caller is told to retry
            # (once the abort is complete): its retry bumps the epoch a second time, or moves
            # to a new producer id if the fence used the last epoch. The fence epoch is never
            # any producer's.
            txn.last_producer_id, txn.last_epoch = -1, -1
            self._fence(txn)
            aborted = self._prepare(txn, False, now)
            return InitOutcome(ErrorCode.CONCURRENT_TRANSACTIONS, aborted=aborted)
        txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.epoch
        if txn.epoch >= MAX_EPOCH:
            txn.producer_id, txn.epoch = self.new_producer_id(), 0
        else:
            txn.epoch += 1
        txn.timeout_ms = timeout_ms
        txn.state = EMPTY
        txn.update_ms = now
        self.changed[tid] = None
        return InitOutcome(_NONE, txn.producer_id, txn.epoch)

    # -- the transaction's partitions -----------------------------------------------------------

    def _check(self, tid: str, producer_id: int, epoch: int) -> tuple[ErrorCode, Txn | None]:
        refused = self.refused(tid)
        if refused is not None:
            return refused, None
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return _NONE, txn

    def add_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: list[TopicPartition], now: int
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition): the
        transaction begins, or grows."""
        error, txn = self._check(tid, producer_id, epoch)
        if txn is None:
            return error
        if txn.state in ENDING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state != ONGOING:
            txn.state = ONGOING
            txn.start_ms = now
            txn.partitions = set()
        elif txn.partitions.issuperset(partitions):
            return _NONE  # nothing new: nothing to write (as Kafka answers at once)
        txn.partitions.update(partitions)
        txn.update_ms = now
        self.changed[tid] = None
        return _NONE

    def in_transaction(
        self, tid: str, producer_id: int, epoch: int, offsets_partition: TopicPartition
    ) -> ErrorCode:
        """TxnOffsetCommit's check: the group's offsets partition was added (AddOffsetsToTxn)
        to this open transaction."""
        error, txn = self._check(tid, producer_id, epoch)
        if txn is None:
            return error
        if txn.state in ENDING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state != ONGOING or offsets_partition not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return _NONE

    def verify(
        self, tid: str | None, producer_id: int, epoch: int, tp: TopicPartition
    ) -> tuple[ErrorCode, str] | None:
        """Why a transactional batch may not be appended (None: it may), as Kafka's
        partition verification answers a Produce."""
        txn = self.txns.get(tid) if tid is not None else None
        if txn is not None and txn.producer_id == producer_id and epoch < txn.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, (
                f"producer {producer_id} epoch {epoch} is fenced by epoch {txn.epoch}"
            )
        if (
            txn is None
            or txn.producer_id != producer_id
            or txn.epoch != epoch
            or txn.state != ONGOING
            or tp not in txn.partitions
        ):
            return ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction"
        return None

    # -- EndTxn and timeouts ----------------------------------------------------------------------

    def end_txn(
        self, tid: str, producer_id: int, epoch: int, commit: bool, now: int
    ) -> tuple[ErrorCode, Ended | None]:
        error, txn = self._check(tid, producer_id, epoch)
        if txn is None:
            return error, None
        state = txn.state
        if state == ONGOING:
            return _NONE, self._prepare(txn, commit, now)
        if state == (PREPARE_COMMIT if commit else PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, None  # still writing its markers
        if state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
            return _NONE, None  # a retry of the EndTxn that completed it
        return ErrorCode.INVALID_TXN_STATE, None

    def _prepare(self, txn: Txn, commit: bool, now: int) -> Ended:
        """The first step of ending (PrepareCommit or PrepareAbort)."""
        txn.state = PREPARE_COMMIT if commit else PREPARE_ABORT
        txn.update_ms = now
        self.changed[txn.transactional_id] = None
        return self._ended(txn)

    @staticmethod
    def _ended(txn: Txn) -> Ended:
        return Ended(
            txn.transactional_id,
            txn.producer_id,
            txn.epoch,
            txn.state == PREPARE_COMMIT,
            tuple(sorted(txn.partitions)),
        )

    def complete(self, ended: Ended, now: int) -> None:
        """The second step: the transaction's markers are durable."""
        txn = self.txns.get(ended.transactional_id)
        if txn is None or txn.state not in ENDING:
            return
        txn.state = COMPLETE_COMMIT if ended.commit else COMPLETE_ABORT
        txn.partitions = set()
        txn.update_ms = now
        self.changed[txn.transactional_id] = None

    def in_flight(self) -> list[Ended]:
        """The transactions between the two steps (found so at start: their markers are
        written again)."""
        return [self._ended(txn) for txn in self.txns.values() if txn.state in ENDING]

    def holds(self, producer_id: int, tp: TopicPartition) -> bool:
        """Whether an open (or ending) transaction of this producer id holds the partition:
        what a partition loading at start asks of a transaction left open in its log."""
        return any(
            txn.producer_id == producer_id and txn.state in OPEN and tp in txn.partitions
            for txn in self.txns.values()
        )

    def abort_timed_out(self, now: int) -> list[Ended]:
        """Transactions open longer than their timeout, aborted under a bumped epoch so their
        producer is fenced (Kafka's abortTimedOutTransactions)."""
        out: list[Ended] = []
        if self.loading:
            return out  # a partition of it may still be loading: checked once all are
        for txn in self.txns.values():
            if txn.state == ONGOING and now - txn.start_ms > txn.timeout_ms:
                txn.last_producer_id, txn.last_epoch = -1, -1
                self._fence(txn)
                out.append(self._prepare(txn, False, now))
        return out

    @staticmethod
    def _fence(txn: Txn) -> None:
        """The epoch an abort by the coordinator writes its markers under, so the partitions
        refuse the producer's older one (at the last epoch, that one: the next InitProducerId
        moves the id to a new producer id)."""
        if txn.epoch < MAX_EPOCH:
            txn.epoch += 1

    def expire_ids(self, now: int) -> int:
        """Forget the ids with no transaction open that were last used
        transactional.id.expiration.ms ago (Kafka's removeExpiredTransactionalIds); how many."""
        expired = [
            tid
            for tid, txn in self.txns.items()
            if txn.state not in OPEN and now - txn.update_ms >= self.id_expiration_ms
        ]
        for tid in expired:
            del self.txns[tid]
            self.changed[tid] = None
        return len(expired)

    # -- the log ------------------------------------------------------------------------------

    def record(self, tid: str) -> tuple[int, bytes, bytes | None]:
        """The id's partition, key and value (None: a tombstone, the id is gone), as Kafka's
        TransactionLog writes them."""
        from minicoord.protocol import transaction_records as tr

        key = tr.encode_key(tid)
        txn = self.txns.get(tid)
        if txn is None:
            return self.partition_for(tid), key, None
        value = tr.encode_value(
            txn.producer_id,
            txn.epoch,
            txn.timeout_ms,
            txn.state,
            None if txn.state == EMPTY else txn.partitions,
            txn.update_ms,
            -1 if txn.state == EMPTY else txn.start_ms,  # as Kafka's Empty transition writes
        )
        return self.partition_for(tid), key, value

    def load(self, tid: str, value: bytes | None) -> None:
        """One id's latest record, read back at start."""
        from minicoord.protocol import transaction_records as tr

        if value is None:
            self.txns.pop(tid, None)
            return
        v = tr.decode_value(value)
        state = tr.STATUS_NAMES[v.transaction_status]
        if state == "Dead":
            self.txns.pop(tid, None)
            return
        if state == "PrepareEpochFence":
            state = PREPARE_ABORT
        txn = Txn(tid, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state)
        txn.partitions = tr.partitions_of(v)
        txn.start_ms = v.transaction_start_timestamp_ms
        txn.update_ms = v.transaction_last_update_timestamp_ms
        self.txns[tid] = txn

    # -- describing -----------------------------------------------------------------------------

    def get(self, tid: str) -> Txn | None:
        return self.txns.get(tid)
