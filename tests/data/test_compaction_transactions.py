"""Compaction of a topic written by transactions, as Kafka's cleaner treats it: the records of
an aborted transaction are dropped and never supersede a committed record of their key, no
record at or past the last stable offset is cleaned while its transaction is open, and a
marker stays while any record of its transaction does, then goes after delete.retention.ms
(its aborted transaction with it from the partition's index; a restart still reads committed
data past where it was). Online (the server's cleaner) and offline (`minicoord log compact`)."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from datakit import compact_offline
from deliverykit import read_to_end
from minicoord.testing.embedded import EmbeddedServer, running

TOPIC = "compacted-txn"
CALL_S = 15
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}


def read(bootstrap: str, isolation: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of the partition, to its end as `isolation` sees it."""
    return read_to_end(bootstrap, TOPIC, 1, isolation, CALL_S)


class Writer:
    """Records 200 ms apart by their own timestamps: with segment.ms=100 each batch after the
    first rolls the segment (as test_compaction_configs writes them). They start ahead of the
    clock, so that a marker (stamped with the broker's time, as Kafka stamps it) is followed
    by a roll as well."""

    def __init__(self, server: EmbeddedServer) -> None:
        self.bootstrap = server.bootstrap
        self.at = int(time.time() * 1000) + 60_000
        self.txn = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "compact"})
        self.txn.init_transactions(CALL_S)
        self.plain = Producer({"bootstrap.servers": self.bootstrap})

    def _ts(self) -> int:
        self.at += 200
        return self.at

    def transaction(self, key: bytes, value: bytes, commit: bool | None) -> None:
        """One record in a transaction, committed, aborted, or (None) left open."""
        self.txn.begin_transaction()
        self.txn.produce(TOPIC, key=key, value=value, partition=0, timestamp=self._ts())
        self.txn.flush(CALL_S)
        if commit is True:
            self.txn.commit_transaction(CALL_S)
        elif commit is False:
            self.txn.abort_transaction(CALL_S)

    def fillers(self, n: int, key: bytes = b"filler") -> None:
        for i in range(n):
            self.plain.produce(TOPIC, key=key, value=str(i).encode(), partition=0,
                               timestamp=self._ts())  # fmt: skip
            self.plain.flush(CALL_S)


def wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + CALL_S
    for _ in range(100):
        if check():  # type: ignore[operator]
            return
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _create(server: EmbeddedServer, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = NewTopic(TOPIC, 1, config={**COMPACTED, **configs})
    admin.create_topics([topic])[TOPIC].result(CALL_S)


def _markers(server: EmbeddedServer) -> tuple[int, list[tuple[int, int, int]]]:
    """(control batches in the partition's log, its aborted transactions), read on the
    server's loop."""
    from minicoord.storage.batch import ATTRIBUTES_AT, CONTROL

    def read() -> tuple[int, list[tuple[int, int, int]]]:
        state = server.server.broker.data.partitions[(TOPIC, 0)]
        controls = sum(1 for data in state.log.batches() if data[ATTRIBUTES_AT + 1] & CONTROL)
        return controls, list(state.txns.aborted)

    return server.call(read)


def test_the_cleaner_drops_aborted_records_and_stops_at_the_open_transaction() -> None:
    with running({"log.cleaner.backoff.ms": 50}) as server:
        _create(server)
        writer = Writer(server)
        writer.transaction(b"k", b"good", commit=True)
        writer.transaction(b"k", b"bad", commit=False)
        writer.fillers(3)
        bootstrap = server.bootstrap

        # The aborted record goes in cleaning; the committed one it came after stays.
        wait_for(
            lambda: (b"k", b"bad") not in read(bootstrap, "read_uncommitted"),
            "the aborted record was never cleaned away",
        )
        assert (b"k", b"good") in read(bootstrap, "read_committed")

        # A transaction left open, its record in a closed segment: the cleaner cleans what
        # lies before it and nothing from it on.
        writer.fillers(3, b"before")
        writer.transaction(b"k", b"pending", commit=None)
        writer.fillers(3, b"after")
        wait_for(
            lambda: [v for k, v in read(bootstrap, "read_uncommitted") if k == b"before"] == [b"2"],
            "the records before the open transaction were never compacted",
        )
        time.sleep(0.5)  # more cleaner rounds (50 ms apart)
        records = read(bootstrap, "read_uncommitted")
        assert (b"k", b"pending") in records
        assert [v for k, v in records if k == b"after"] == [b"0", b"1", b"2"], records
        assert (b"k", b"good") in read(bootstrap, "read_committed")

        writer.txn.abort_transaction(CALL_S)
        writer.fillers(3)
        wait_for(
            lambda: (b"k", b"pending") not in read(bootstrap, "read_uncommitted"),
            "the aborted record was never cleaned away",
        )
        committed = read(bootstrap, "read_committed")
        assert [v for k, v in committed if k == b"k"] == [b"good"], committed


def test_offline_compaction_drops_aborted_records_too(tmp_path: Path) -> None:
    with running(data_dir=tmp_path) as server:
        _create(server)
        writer = Writer(server)
        writer.transaction(b"k", b"good", commit=True)
        writer.transaction(b"k", b"bad", commit=False)
        writer.fillers(2)
    compact_offline(tmp_path)
    with running(data_dir=tmp_path) as server:
        records = read(server.bootstrap, "read_uncommitted")
        assert [v for k, v in records if k == b"k"] == [b"good"], records
        assert [v for k, v in read(server.bootstrap, "read_committed") if k == b"k"] == [b"good"]


def test_a_marker_goes_once_its_transactions_records_are_gone(tmp_path: Path) -> None:
    # Kafka's cleaner drops a COMMIT marker once no record of its transaction is left, and an
    # ABORT marker once its aborted records are gone, after delete.retention.ms (0 here).
    with running({"log.cleaner.backoff.ms": 50}, data_dir=tmp_path) as server:
        _create(server, **{"delete.retention.ms": "0"})
        writer = Writer(server)
        writer.transaction(b"k", b"good", commit=True)
        writer.transaction(b"k", b"bad", commit=False)
        writer.fillers(3)
        # The abort's record and marker go, and the index forgets the transaction; the
        # commit's marker stays beside its record.
        wait_for(lambda: _markers(server) == (1, []), "the abort marker was never dropped")
        assert [v for k, v in read(server.bootstrap, "read_committed") if k == b"k"] == [b"good"]

        # A newer committed value supersedes "good": its transaction's marker goes too.
        writer.transaction(b"k", b"newer", commit=True)
        writer.fillers(3)
        wait_for(
            lambda: (
                [v for k, v in read(server.bootstrap, "read_uncommitted") if k == b"k"]
                == [b"newer"]
            ),
            "the superseded committed record was never cleaned away",
        )
        wait_for(lambda: _markers(server)[0] == 1, "the first commit's marker was never dropped")
    # After a restart the log opens with no marker for what went: no transaction looks open,
    # so a committed write after it is read at once.
    with running({"log.cleaner.backoff.ms": 50}, data_dir=tmp_path) as server:
        assert _markers(server) == (1, [])
        writer = Writer(server)
        writer.transaction(b"k", b"after-restart", commit=True)
        committed = [v for k, v in read(server.bootstrap, "read_committed") if k == b"k"]
        assert committed == [b"newer", b"after-restart"], committed
