"""Offsets committed in transactions: the live state is what the log gives back.

Hypothesis interleaves plain offset commits, transactional ones (TxnOffsetCommit, several
producers at once), transaction ends (commit or abort) and offset deletions. The live side is
the coordinator's OffsetsManager with its PendingTxnOffsets; the log side is the same steps as
`__consumer_offsets` records in Kafka's format (transactional batches of the producer's, its
markers, tombstones), written to a partition's log on disk. Reading that log as a restart
reads it (loading.read_offsets_partition) must give the live offsets and the same open
transactions, and so must the log once the cleaner has compacted it, as Kafka's rule (a
committed transactional offset replaces only an offset written before it) keeps the two in
agreement.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minicoord.protocol.records import Record, offset_commit_key, offset_commit_value
from minicoord.server.coordinator.offsets import CommittedOffset, OffsetsManager
from minicoord.server.coordinator.results import Effects
from minicoord.server.coordinator.txn_offsets import PendingTxnOffsets
from minicoord.server.loading import read_offsets_partition
from minicoord.server.topics import OFFSETS_TOPIC
from minicoord.storage.batch import batch_info, encode_batch
from minicoord.storage.cleaner import clean
from minicoord.storage.control_batch import encode_marker
from minicoord.storage.log import LogManager
from minicoord.storage.txn_index import PartitionTxns

GROUPS = ["alpha", "beta"]
PARTITIONS = [("t", 0), ("t", 1)]
PRODUCERS = [100, 200, 300]
NOW = 1_700_000_000_000
SEGMENT = 1024


class Both:
    """The live coordinator state and the log it writes, side by side."""

    def __init__(self, logs: LogManager) -> None:
        self.offsets = OffsetsManager()
        self.pending = self.offsets.pending = PendingTxnOffsets()
        self.logs = logs
        self.plog = logs.create_log(OFFSETS_TOPIC, 0, SEGMENT)
        self.open: set[int] = set()

    def _write(self, batch: bytearray) -> int:
        base = self.plog.reserve(batch, batch_info(batch))
        self.plog.commit(self.plog.write_out())
        return base

    def commit(self, group: str, tp: tuple[str, int], offset: int) -> None:
        records: list[tuple[int, Record]] = []
        self.offsets.commit(records, 0, group, tp[0], tp[1], offset, -1, "", NOW)
        self._write(encode_batch(self.plog.next_offset, [r for _, r in records], NOW))

    def txn_commit(self, pid: int, group: str, tp: tuple[str, int], offset: int) -> None:
        record = Record(offset_commit_key(group, *tp), offset_commit_value(offset, -1, "", NOW))
        base = self._write(encode_batch(self.plog.next_offset, [record], NOW, pid, 0))
        current = self.offsets.get(group, tp)
        self.pending.add(pid, group, tp, CommittedOffset(offset, -1, "", NOW), base, current)
        self.open.add(pid)

    def end(self, pid: int, commit: bool) -> None:
        if pid in self.open:  # as finish() writes it: where the producer's transaction is
            self._write(encode_marker(self.plog.next_offset, pid, 0, commit, 0, NOW))
            self.open.discard(pid)
        self.pending.complete(self.offsets, pid, commit)

    def delete(self, group: str, tp: tuple[str, int]) -> None:
        fx = Effects()
        if self.offsets.delete(fx, 0, group, tp):
            (_, record), *_ = fx.records
            self._write(encode_batch(self.plog.next_offset, [record], NOW))

    def live(self) -> dict[tuple[str, str, int], int]:
        return {
            (group, topic, index): committed.offset
            for group, tps in self.offsets.offsets.items()
            for (topic, index), committed in tps.items()
        }


def read_back(data_dir: Path) -> tuple[dict[tuple[str, str, int], int], set[int]]:
    """The offsets and the producers with offsets still pending, as a restart reads them."""
    logs = LogManager(data_dir)
    plog, replay, _producers, _txns = read_offsets_partition(logs, 0, SEGMENT)
    plog.close()
    offsets = {key: committed.offset for key, committed in replay.offsets.items()}
    return offsets, set(replay.open_txns)


def compact(data_dir: Path) -> None:
    """The cleaner's pass over the closed segments below the last stable offset."""
    logs = LogManager(data_dir)
    txns = PartitionTxns()
    plog = logs.open_log(OFFSETS_TOPIC, 0, SEGMENT, txns.load)
    txns.resolve_from(plog)
    plog.roll()
    cleanable = txns.stable(plog.cleanable(NOW, 0), plog.next_offset)
    clean(plog, NOW, 10**12, cleanable, txns.aborted_ranges())
    plog.close()


group_partition = st.tuples(st.sampled_from(GROUPS), st.sampled_from(PARTITIONS))
ops = st.one_of(
    st.tuples(st.just("commit"), group_partition, st.integers(0, 10**6)),
    st.tuples(st.just("txn"), st.sampled_from(PRODUCERS), group_partition, st.integers(0, 10**6)),
    st.tuples(st.just("end"), st.sampled_from(PRODUCERS), st.booleans()),
    st.tuples(st.just("delete"), group_partition),
)


def run(both: Both, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "commit":
        (group, tp), offset = op[1], op[2]
        both.commit(group, tp, offset)
    elif kind == "txn":
        pid, (group, tp), offset = op[1], op[2], op[3]
        both.txn_commit(pid, group, tp, offset)
    elif kind == "end":
        both.end(op[1], op[2])
    else:
        group, tp = op[1]
        both.delete(group, tp)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=40))
def test_the_log_read_back_gives_the_live_offsets(operations: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        logs = LogManager(data_dir)
        both = Both(logs)
        for op in operations:
            run(both, op)
        live, still_open = both.live(), set(both.pending.by_producer)
        logs.close()
        assert still_open == both.open
        assert read_back(data_dir) == (live, still_open)
        compact(data_dir)
        assert read_back(data_dir) == (live, still_open)


def test_a_later_plain_commit_outlives_the_transaction_that_commits_after_it() -> None:
    """Kafka's rules, spelled out: the transaction's offset (written first) does not replace
    the plain commit written after it, and a deletion takes the transaction's with it."""
    with tempfile.TemporaryDirectory() as tmp:
        logs = LogManager(Path(tmp))
        both = Both(logs)
        both.txn_commit(100, "alpha", ("t", 0), 5)
        both.commit("alpha", ("t", 0), 7)
        both.txn_commit(200, "alpha", ("t", 1), 9)
        both.delete("alpha", ("t", 1))
        assert both.pending.unstable("alpha", ("t", 0))
        both.end(100, True)
        both.end(200, True)
        assert both.live() == {("alpha", "t", 0): 7}
        assert not both.pending.unstable("alpha", ("t", 0))
        logs.close()
        assert read_back(Path(tmp)) == (both.live(), set())


def test_of_two_transactions_the_one_written_later_wins_whichever_commits_first() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        logs = LogManager(Path(tmp))
        both = Both(logs)
        both.txn_commit(100, "alpha", ("t", 0), 1)
        both.txn_commit(200, "alpha", ("t", 0), 2)
        both.txn_commit(100, "beta", ("t", 0), 1)
        both.txn_commit(200, "beta", ("t", 0), 2)
        both.end(200, True)  # alpha: the later one first
        both.end(100, True)
        assert both.live() == {("alpha", "t", 0): 2, ("beta", "t", 0): 2}
        assert not both.pending.materialized
        logs.close()
        assert read_back(Path(tmp)) == (both.live(), set())
