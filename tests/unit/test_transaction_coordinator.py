"""The transaction coordinator's rules, fed requests and time directly (no sockets, no sleeps):
Kafka's TransactionCoordinator for transaction version 1 — ids and epochs, fencing, the
states a transaction passes through (its two steps of ending), what EndTxn answers in each,
timeouts, and its `__transaction_state` records read back."""

from __future__ import annotations

import itertools

import pytest
from minicoord.protocol.errors import ErrorCode
from minicoord.server.transactions.coordinator import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    MAX_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    Ended,
    TransactionCoordinator,
    Txn,
)

MAX_TIMEOUT = 900_000
TP = ("orders", 0)
OFFSETS_TP = ("__consumer_offsets", 7)


@pytest.fixture
def coordinator() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(MAX_TIMEOUT, lambda: next(ids))


def init(
    c: TransactionCoordinator, tid: str = "t", now: int = 0, timeout: int = 60_000
) -> tuple[int, int]:
    outcome = c.init_producer_id(tid, timeout, -1, -1, now)
    assert outcome.error is ErrorCode.NONE, outcome
    return outcome.producer_id, outcome.epoch


def test_a_new_id_gets_a_producer_id_at_epoch_0_and_each_init_bumps_it(
    coordinator: TransactionCoordinator,
) -> None:
    assert init(coordinator) == (1000, 0)
    assert init(coordinator) == (1000, 1)
    assert init(coordinator, "other") == (1001, 0)
    assert coordinator.get("t").state == EMPTY


@pytest.mark.parametrize("timeout", [0, -1, MAX_TIMEOUT + 1])
def test_a_timeout_outside_the_maximum_is_refused(
    coordinator: TransactionCoordinator, timeout: int
) -> None:
    outcome = coordinator.init_producer_id("t", timeout, -1, -1, 0)
    assert outcome.error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert coordinator.get("t") is None


def test_add_then_commit_in_two_steps(coordinator: TransactionCoordinator) -> None:
    pid, epoch = init(coordinator)
    assert coordinator.add_partitions("t", pid, epoch, [TP], 10) is ErrorCode.NONE
    # AddOffsetsToTxn adds the group's offsets partition, as Kafka records it.
    assert coordinator.add_partitions("t", pid, epoch, [OFFSETS_TP], 11) is ErrorCode.NONE
    txn = coordinator.get("t")
    assert (txn.state, txn.start_ms) == (ONGOING, 10)
    assert coordinator.verify("t", pid, epoch, TP) is None
    assert coordinator.in_transaction("t", pid, epoch, OFFSETS_TP) is ErrorCode.NONE
    other_group = ("__consumer_offsets", 8)
    assert coordinator.in_transaction("t", pid, epoch, other_group) is ErrorCode.INVALID_TXN_STATE
    error, ended = coordinator.end_txn("t", pid, epoch, True, 20)
    assert error is ErrorCode.NONE
    assert ended == Ended("t", pid, epoch, True, (OFFSETS_TP, TP))
    # The first step: prepared, and every request for the id waits (Kafka's answer).
    assert txn.state == PREPARE_COMMIT
    busy = ErrorCode.CONCURRENT_TRANSACTIONS
    assert coordinator.end_txn("t", pid, epoch, True, 21) == (busy, None)
    assert coordinator.end_txn("t", pid, epoch, False, 21) == (ErrorCode.INVALID_TXN_STATE, None)
    assert coordinator.add_partitions("t", pid, epoch, [TP], 21) is busy
    assert coordinator.in_transaction("t", pid, epoch, OFFSETS_TP) is busy
    assert coordinator.init_producer_id("t", 60_000, -1, -1, 21).error is busy
    assert coordinator.in_flight() == [ended]
    # The second step, once the markers are durable.
    coordinator.complete(ended, 22)
    assert txn.state == COMPLETE_COMMIT and not txn.partitions
    assert coordinator.in_flight() == []
    # A retry of the same EndTxn is answered NONE and ends nothing again.
    assert coordinator.end_txn("t", pid, epoch, True, 21) == (ErrorCode.NONE, None)
    # The other outcome, or ending with nothing open, is INVALID_TXN_STATE.
    assert coordinator.end_txn("t", pid, epoch, False, 22) == (ErrorCode.INVALID_TXN_STATE, None)


def test_end_with_nothing_added_is_invalid(coordinator: TransactionCoordinator) -> None:
    pid, epoch = init(coordinator)
    assert coordinator.end_txn("t", pid, epoch, True, 1) == (ErrorCode.INVALID_TXN_STATE, None)
    assert coordinator.end_txn("t", pid, epoch, False, 1) == (ErrorCode.INVALID_TXN_STATE, None)


def test_unknown_ids_wrong_producers_and_old_epochs(coordinator: TransactionCoordinator) -> None:
    pid, epoch = init(coordinator)
    mapping = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert coordinator.add_partitions("nope", pid, epoch, [TP], 0) is mapping
    assert coordinator.add_partitions("t", pid + 1, epoch, [TP], 0) is mapping
    assert coordinator.end_txn("t", pid + 1, epoch, True, 0) == (mapping, None)
    init(coordinator)  # epoch 1 fences epoch 0
    assert coordinator.add_partitions("t", pid, epoch, [TP], 0) is ErrorCode.PRODUCER_FENCED
    assert coordinator.end_txn("t", pid, epoch, True, 0) == (ErrorCode.PRODUCER_FENCED, None)


def test_produce_verification(coordinator: TransactionCoordinator) -> None:
    pid, epoch = init(coordinator)
    # Not added yet (or no transaction open): INVALID_TXN_STATE, as Kafka's verification.
    assert coordinator.verify("t", pid, epoch, TP)[0] is ErrorCode.INVALID_TXN_STATE
    coordinator.add_partitions("t", pid, epoch, [TP], 0)
    assert coordinator.verify("t", pid, epoch, ("orders", 1))[0] is ErrorCode.INVALID_TXN_STATE
    assert coordinator.verify("other", pid, epoch, TP)[0] is ErrorCode.INVALID_TXN_STATE
    assert coordinator.verify(None, pid, epoch, TP)[0] is ErrorCode.INVALID_TXN_STATE
    # A new producer fences the open transaction (its abort under the fence epoch).
    fenced = coordinator.init_producer_id("t", 60_000, -1, -1, 1)
    assert fenced.aborted is not None
    # A fenced producer's batch: INVALID_PRODUCER_EPOCH.
    assert coordinator.verify("t", pid, epoch, TP)[0] is ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_new_producer_aborts_the_open_transaction_under_its_epoch(
    coordinator: TransactionCoordinator,
) -> None:
    pid, epoch = init(coordinator)
    coordinator.add_partitions("t", pid, epoch, [TP], 0)
    outcome = coordinator.init_producer_id("t", 60_000, -1, -1, 5)
    # As Kafka: the abort first, the caller told to retry (CONCURRENT_TRANSACTIONS).
    assert (outcome.error, outcome.producer_id, outcome.epoch) == (
        ErrorCode.CONCURRENT_TRANSACTIONS,
        -1,
        -1,
    )
    # The abort markers carry the fence epoch, so the partitions fence the old producer too.
    assert outcome.aborted == Ended("t", pid, 1, False, (TP,))
    assert coordinator.get("t").state == PREPARE_ABORT
    retried = coordinator.init_producer_id("t", 60_000, -1, -1, 5)
    assert (retried.error, retried.aborted) == (ErrorCode.CONCURRENT_TRANSACTIONS, None)
    coordinator.complete(outcome.aborted, 6)
    assert coordinator.get("t").state == COMPLETE_ABORT
    # The retry after it bumps a second time: the fence epoch is nobody's.
    retried = coordinator.init_producer_id("t", 60_000, -1, -1, 7)
    assert (retried.error, retried.producer_id, retried.epoch) == (ErrorCode.NONE, pid, 2)
    # The fenced producer's KIP-360 re-init with its old epoch is refused.
    stale = coordinator.init_producer_id("t", 60_000, pid, epoch, 8)
    assert stale.error is ErrorCode.PRODUCER_FENCED


def test_kip_360_reinit_with_the_current_or_the_previous_epoch(
    coordinator: TransactionCoordinator,
) -> None:
    pid, epoch = init(coordinator)
    bumped = coordinator.init_producer_id("t", 60_000, pid, epoch, 1)
    assert (bumped.error, bumped.epoch) == (ErrorCode.NONE, 1)
    # A retry of that call (its answer lost) names the previous epoch: the same answer again.
    again = coordinator.init_producer_id("t", 60_000, pid, epoch, 2)
    assert (again.error, again.producer_id, again.epoch) == (ErrorCode.NONE, pid, 1)
    stale = coordinator.init_producer_id("t", 60_000, pid, 7, 3)
    assert stale.error is ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_moves_to_a_new_producer_id(coordinator: TransactionCoordinator) -> None:
    pid, _ = init(coordinator)
    coordinator.get("t").epoch = MAX_EPOCH
    new_pid, epoch = init(coordinator)
    assert (new_pid, epoch) == (pid + 1, 0)
    # With a transaction open, its abort markers still name the producer id its batches
    # carry; the new producer id comes after.
    coordinator.add_partitions("t", new_pid, 0, [TP], 1)
    coordinator.get("t").epoch = MAX_EPOCH - 1
    outcome = coordinator.init_producer_id("t", 60_000, -1, -1, 2)
    assert outcome.aborted == Ended("t", new_pid, MAX_EPOCH, False, (TP,))
    assert outcome.error is ErrorCode.CONCURRENT_TRANSACTIONS
    coordinator.complete(outcome.aborted, 3)
    retried = coordinator.init_producer_id("t", 60_000, -1, -1, 4)
    assert (retried.producer_id, retried.epoch) == (new_pid + 1, 0)


def test_timed_out_transactions_are_aborted_and_fenced(coordinator: TransactionCoordinator) -> None:
    pid, epoch = init(coordinator, timeout=1000)
    coordinator.add_partitions("t", pid, epoch, [TP], 100)
    assert coordinator.abort_timed_out(1100) == []  # not past it yet
    ended = coordinator.abort_timed_out(1101)
    assert ended == [Ended("t", pid, epoch + 1, False, (TP,))]
    assert coordinator.get("t").state == PREPARE_ABORT
    assert coordinator.abort_timed_out(5000) == []
    coordinator.complete(ended[0], 5000)
    assert coordinator.get("t").state == COMPLETE_ABORT
    # The producer's own EndTxn now finds itself fenced.
    assert coordinator.end_txn("t", pid, epoch, True, 5001) == (ErrorCode.PRODUCER_FENCED, None)


def test_an_unused_id_is_forgotten_after_its_expiration() -> None:
    ids = itertools.count(1)
    c = TransactionCoordinator(MAX_TIMEOUT, lambda: next(ids), id_expiration_ms=1000)
    init(c, "idle", now=0)
    init(c, "busy", now=0)
    c.add_partitions("busy", 2, 0, [TP], 500)  # open: never expires while open
    assert c.expire_ids(999) == 0
    assert c.expire_ids(1000) == 1
    assert c.get("idle") is None and c.get("busy") is not None
    # A new producer of the forgotten id gets a new producer id.
    assert init(c, "idle", now=2000) == (3, 0)


def test_nothing_times_out_or_is_served_while_the_logs_load(
    coordinator: TransactionCoordinator,
) -> None:
    pid, epoch = init(coordinator, timeout=1000)
    coordinator.add_partitions("t", pid, epoch, [TP], 0)
    coordinator.loading = True
    assert coordinator.abort_timed_out(10_000) == []
    loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.end_txn("t", pid, epoch, True, 1) == (loading, None)
    assert coordinator.init_producer_id("u", 60_000, -1, -1, 1).error is loading
    coordinator.loading = False
    assert len(coordinator.abort_timed_out(10_000)) == 1


def test_an_unavailable_partitions_ids_are_refused(coordinator: TransactionCoordinator) -> None:
    coordinator.unavailable.add(coordinator.partition_for("t"))
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator.init_producer_id("t", 60_000, -1, -1, 0).error is unavailable
    assert coordinator.get("t") is None
    assert init(coordinator, "elsewhere") == (1000, 0)


def test_the_partition_of_an_id_is_kafkas() -> None:
    """Utils.abs(String.hashCode) % transaction.state.log.num.partitions, as Kafka's
    TransactionStateManager.partitionFor (the hash written out: s[0]*31^(n-1) + ...)."""
    c = TransactionCoordinator(MAX_TIMEOUT, lambda: 1)
    for tid in ("my-txn", "orders-tx-0", "ü"):
        h = sum(ord(ch) * 31 ** (len(tid) - 1 - i) for i, ch in enumerate(tid)) % 2**32
        h = h - 2**32 if h >= 2**31 else h
        assert c.partition_for(tid) == abs(h) % 50, tid


def _state(txn: Txn | None) -> tuple[object, ...] | None:
    if txn is None:
        return None
    return (txn.producer_id, txn.epoch, txn.timeout_ms, txn.state, txn.partitions, txn.start_ms,
            txn.update_ms)  # fmt: skip


def test_the_records_read_back_give_each_ids_state(coordinator: TransactionCoordinator) -> None:
    """What every change wrote, replayed into a new coordinator as a restart reads the log:
    the same ids, producer ids, epochs, states and partitions (an expired id: gone)."""
    written: dict[bytes, bytes | None] = {}

    def drain() -> None:
        for tid in list(coordinator.changed):
            _partition, key, value = coordinator.record(tid)
            written[key] = value
        coordinator.changed.clear()

    pid, epoch = init(coordinator, "open")
    coordinator.add_partitions("open", pid, epoch, [TP, OFFSETS_TP], 5)
    drain()
    pid2, epoch2 = init(coordinator, "prepared")
    coordinator.add_partitions("prepared", pid2, epoch2, [TP], 6)
    coordinator.end_txn("prepared", pid2, epoch2, True, 7)
    drain()
    pid3, epoch3 = init(coordinator, "done")
    coordinator.add_partitions("done", pid3, epoch3, [("orders", 1)], 8)
    _, ended = coordinator.end_txn("done", pid3, epoch3, False, 9)
    assert ended is not None
    coordinator.complete(ended, 10)
    init(coordinator, "gone", now=0)
    coordinator.id_expiration_ms = 100
    assert coordinator.expire_ids(104) == 1  # "gone", last used at 0
    drain()

    from minicoord.protocol import transaction_records as tr

    fresh = TransactionCoordinator(MAX_TIMEOUT, lambda: 99)
    for key, value in written.items():
        fresh.load(tr.decode_key(key), value)
    assert set(fresh.txns) == {"open", "prepared", "done"}
    for tid in fresh.txns:
        assert _state(fresh.get(tid)) == _state(coordinator.get(tid)), tid
    assert fresh.get("prepared").state == PREPARE_COMMIT
    assert fresh.in_flight() == [Ended("prepared", pid2, epoch2, True, (TP,))]
    assert fresh.holds(pid, TP) and fresh.holds(pid, OFFSETS_TP)
    assert not fresh.holds(pid3, ("orders", 1)) and not fresh.holds(pid, ("orders", 1))
