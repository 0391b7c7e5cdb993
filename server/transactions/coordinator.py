"""The transaction coordinator's rules (Kafka's TransactionCoordinator, transaction version 1).

Sans-IO: each call is given the time and returns an error code and, when a transaction ends,
what ended (`Ended`): the shell writes its markers to the transaction's partitions and settles
its offsets in the group coordinator, and answers once those are durable. A single node
writes its markers in the same turn, so a transaction never rests in PrepareCommit or
PrepareAbort between requests, and no request meets one there (Kafka's
CONCURRENT_TRANSACTIONS).

State lives in memory: a restart forgets the transactional ids, and every transaction left
open in a partition's log is aborted when that log loads (loading.py), so no open transaction
outlives the coordinator that knew it; a producer of before the restart is fenced by the
verification every transactional batch passes (`verify`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass

TopicPartition = tuple[str, int]

# Kafka's names for the states, as DescribeTransactions and ListTransactions report them.
EMPTY = "Empty"
ONGOING = "Ongoing"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"

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
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
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
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class InitOutcome:
    error: ErrorCode
    producer_id: int = -1
    epoch: int = -1
    # An open transaction the new epoch fenced: aborted before the answer.
    aborted: Ended | None = None


class TransactionCoordinator:
    def __init__(
        self,
        max_timeout_ms: int,
        new_producer_id: Callable[[], int],
        id_expiration_ms: int = 604_800_000,
    ) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.new_producer_id = new_producer_id
        self.id_expiration_ms = id_expiration_ms
        self.txns: dict[str, Txn] = {}

    # -- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(
        self, tid: str, timeout_ms: int, producer_id: int, epoch: int, now: int
    ) -> InitOutcome:
        """An id and epoch for the transactional id, fencing any earlier producer of it.
        `producer_id`/`epoch` are the caller's current ones (KIP-360, v3+), or -1."""
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitOutcome(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(tid)
        if txn is None:
            txn = self.txns[tid] = Txn(tid, self.new_producer_id(), 0, timeout_ms)
            txn.update_ms = now
            return InitOutcome(_NONE, txn.producer_id, 0)
        if producer_id != -1:
            if producer_id == txn.last_producer_id and epoch == txn.last_epoch:
                # A retry whose answer was lost: answered again, no second bump.
                if txn.state != ONGOING:
                    return InitOutcome(_NONE, txn.producer_id, txn.epoch)
            elif producer_id != txn.producer_id or epoch != txn.epoch:
                return InitOutcome(ErrorCode.PRODUCER_FENCED)
        aborted = None
        txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.epoch
        if txn.state == ONGOING:
            # The open transaction of the producer being fenced is aborted under a bumped
            # epoch (Kafka's PrepareEpochFence, then PrepareAbort), its markers under the
            # producer id its batches carry.
            self._fence(txn)
            aborted = self._end(txn, False, now)
        if txn.epoch >= MAX_EPOCH:
            txn.producer_id, txn.epoch = self.new_producer_id(), 0
        elif aborted is None:
            txn.epoch += 1
        txn.timeout_ms = timeout_ms
        txn.state = EMPTY if aborted is None else COMPLETE_ABORT
        txn.update_ms = now
        return InitOutcome(_NONE, txn.producer_id, txn.epoch, aborted)

    # -- the transaction's partitions -----------------------------------------------------------

    def _check(self, tid: str, producer_id: int, epoch: int) -> tuple[ErrorCode, Txn | None]:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return _NONE, txn

    def add_partitions(
        self,
        tid: str,
        producer_id: int,
        epoch: int,
        partitions: list[TopicPartition],
        now: int,
        groups: tuple[str, ...] = (),
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn's group): the transaction begins, or grows."""
        error, txn = self._check(tid, producer_id, epoch)
        if txn is None:
            return error
        if txn.state != ONGOING:
            txn.state = ONGOING
            txn.start_ms = now
            txn.partitions = set()
            txn.groups = set()
        txn.partitions.update(partitions)
        txn.groups.update(groups)
        txn.update_ms = now
        return _NONE

    def in_transaction(self, tid: str, producer_id: int, epoch: int, group: str) -> ErrorCode:
        """TxnOffsetCommit's check: the group was added (AddOffsetsToTxn) to this open
        transaction."""
        error, txn = self._check(tid, producer_id, epoch)
        if txn is None:
            return error
        if txn.state != ONGOING or group not in txn.groups:
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
            return _NONE, self._end(txn, commit, now)
        if state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
            return _NONE, None  # a retry of the EndTxn that completed it
        return ErrorCode.INVALID_TXN_STATE, None

    def _end(self, txn: Txn, commit: bool, now: int) -> Ended:
        ended = Ended(
            txn.transactional_id,
            txn.producer_id,
            txn.epoch,
            commit,
            tuple(sorted(txn.partitions)),
            tuple(sorted(txn.groups)),
        )
        txn.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        txn.partitions = set()
        txn.groups = set()
        txn.update_ms = now
        return ended

    def abort_timed_out(self, now: int) -> list[Ended]:
        """Transactions open longer than their timeout, aborted under a bumped epoch so their
        producer is fenced (Kafka's abortTimedOutTransactions)."""
        out = []
        for txn in self.txns.values():
            if txn.state == ONGOING and now - txn.start_ms > txn.timeout_ms:
                txn.last_producer_id, txn.last_epoch = -1, -1
                self._fence(txn)
                out.append(self._end(txn, False, now))
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
            if txn.state != ONGOING and now - txn.update_ms >= self.id_expiration_ms
        ]
        for tid in expired:
            del self.txns[tid]
        return len(expired)

    # -- describing -----------------------------------------------------------------------------

    def get(self, tid: str) -> Txn | None:
        return self.txns.get(tid)
