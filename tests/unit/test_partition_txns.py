"""A partition's transactions (server/data/txn_index.py) and Kafka's transaction markers
(storage/control_batch.py): the last stable offset, the aborted transactions a read_committed
Fetch is told about, and the rebuild from a log's batch headers and markers."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch
from minicoord.storage.batch import CONTROL, TRANSACTIONAL, BatchInfo, batch_info, check_batch
from minicoord.storage.control_batch import ABORT, COMMIT, encode_marker, marker_type
from minicoord.storage.txn_index import PartitionTxns


def info(base: int, pid: int, attributes: int = TRANSACTIONAL, last_delta: int = 0) -> BatchInfo:
    return BatchInfo(base, 100, attributes, last_delta, 0, 0, pid, 0, 0, last_delta + 1)


def test_a_marker_is_kafkas_control_batch() -> None:
    data = bytes(encode_marker(41, 7001, 3, True, 0, 1_700_000_000_000))
    batch: DefaultRecordBatch = check_batch(data)  # CRC and layout, by kafka-python's reader
    assert (batch.is_control_batch, batch.is_transactional) == (True, True)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7001, 3, -1)
    (record,) = list(batch)
    # ControlRecordType: version 0, type 1 (commit); EndTransactionMarker: version 0, epoch 0.
    assert (record.offset, record.key, record.value) == (41, b"\0\0\0\1", b"\0" * 6)
    assert batch_info(data).attributes == CONTROL | TRANSACTIONAL
    assert marker_type(data) == COMMIT
    assert marker_type(encode_marker(0, 1, 0, False, 0, 0)) == ABORT


def test_the_last_stable_offset_is_the_oldest_open_transactions_start() -> None:
    txns = PartitionTxns()
    assert txns.first_unstable(10) == 10
    txns.on_append(info(10, 1), 10)
    txns.on_append(info(11, 2), 11)
    txns.on_append(info(12, 1), 12)  # the same transaction: still open from 10
    assert txns.first_unstable(13) == 10
    txns.on_marker(1, True, 13)
    assert txns.first_unstable(14) == 11
    txns.on_marker(2, False, 14)
    assert txns.first_unstable(15) == 15
    # A plain batch or a marker opens nothing.
    txns.on_append(info(15, 3, attributes=0), 15)
    txns.on_append(info(16, 3, attributes=CONTROL | TRANSACTIONAL), 16)
    assert txns.open == {}


def test_the_aborted_transactions_a_fetch_reads_into() -> None:
    txns = PartitionTxns()
    for pid, first, marker in [(1, 0, 5), (2, 6, 9), (3, 10, 20)]:
        txns.on_append(info(first, pid), first)
        txns.on_marker(pid, False, marker)
    txns.on_append(info(21, 4), 21)
    txns.on_marker(4, True, 22)  # committed: never listed
    assert txns.aborted_between(0, 30) == [(1, 0), (2, 6), (3, 10)]
    # Those ending before the fetch offset or starting at or past the end read are left out.
    assert txns.aborted_between(6, 10) == [(2, 6)]
    assert txns.aborted_between(9, 11) == [(2, 6), (3, 10)]
    assert txns.aborted_between(21, 30) == []
    txns.forget_before(7)
    assert txns.aborted_between(0, 30) == [(2, 6), (3, 10)]


def test_rebuilt_from_the_log_as_it_was() -> None:
    live, loaded = PartitionTxns(), PartitionTxns()
    history = [
        (info(0, 1), None),
        (info(1, 2), None),
        (info(2, 1, CONTROL | TRANSACTIONAL), True),
        (info(3, 2, CONTROL | TRANSACTIONAL), False),
        (info(4, 1), None),
        (info(5, 3), None),
        (info(6, 3, CONTROL | TRANSACTIONAL), False),
    ]
    kinds = {}
    for batch, commit in history:
        loaded.load(batch)
        if commit is None:
            live.on_append(batch, batch.base_offset)
        else:
            live.on_marker(batch.producer_id, commit, batch.base_offset)
            kinds[batch.base_offset] = commit
    assert [offset for offset, _ in loaded.markers_to_resolve()] == [2, 3, 6]
    loaded.resolve(kinds)
    assert (loaded.open, loaded.aborted) == (live.open, live.aborted)
    assert loaded.open == {1: 4}
    assert loaded.aborted_between(0, 10) == [(2, 1), (3, 5)]
