"""Transactions at start: the coordinator's state read back, and what each partition's log
left open settled against it.

`__transaction_state` is read before the listener opens (compacted, a record per id: small),
so the coordinator knows every id, epoch and open transaction before any partition loads.
A transaction a partition's log left open (`state.txns.open`) is kept open while the
coordinator holds it (Ongoing with that partition, or prepared), so its producer carries on
as against Kafka, and a group's offsets it committed wait for it again; any other is aborted
(a marker at the log's end, and a WARNING): no coordinator knows it, and an open one would
hold the last stable offset where it is for good. Until every log has loaded, the
coordinator answers COORDINATOR_LOAD_IN_PROGRESS (clients retry), so no transaction ends
while one of its partitions is still loading; then the transactions found prepared are
completed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offsets import CommittedOffset
from minicoord.server.coordinator.results import Result
from minicoord.server.topics import TRANSACTION_STATE_TOPIC
from minicoord.server.transactions.finish import complete_in_flight
from minicoord.storage.log import StoreError
from minicoord.storage.log_loader import CorruptLog

if TYPE_CHECKING:
    from minicoord.server.broker import Broker
    from minicoord.server.coordinator.replay import PartitionReplay
    from minicoord.server.data.plane import PartitionState

log = logging.getLogger("minicoord.loading")

# `before` for a restored pending offset that a later commit already replaced: never the
# group's current offset, so the transaction's commit leaves that one be.
_SUPERSEDED = CommittedOffset(-1, -1, "", -1)


def load_transaction_state(broker: Broker, on_disk: list[int]) -> None:
    """Read `__transaction_state` into the coordinator (blocking, before the listener)."""
    topics = broker.topics
    count = topics.transaction_state.partitions
    beyond = [p for p in on_disk if p >= count]
    if beyond:
        raise StoreError(
            f"{broker.logs.data_dir} holds {TRANSACTION_STATE_TOPIC} partition {max(beyond)} "
            f"but the topic has {count} partitions"
        )
    if on_disk and not topics.transaction_state_exists:
        # Written by a minicoord that did not record the topic: taken to have the count
        # configured now, and recorded with it.
        broker.create_transaction_state_topic()
    from minicoord.protocol import transaction_records as tr

    coordinator = broker.transactions
    topic = topics.transaction_state
    segment_bytes = broker.topics.config_of(topic).segment_bytes
    for partition in on_disk:
        try:
            plog = broker.logs.open_log(TRANSACTION_STATE_TOPIC, partition, segment_bytes)
            try:
                latest: dict[bytes, bytes | None] = {}
                for record in plog.records():
                    latest[record.key] = record.value
                decoded = [(tr.decode_key(key), value) for key, value in latest.items()]
                for _tid, value in decoded:
                    if value is not None:
                        tr.decode_value(value)  # every value parses before any is taken
            except Exception:
                plog.close()
                raise
        except Exception as exc:
            log.error(
                "%s-%d is not served: %s (its transactional ids get COORDINATOR_NOT_AVAILABLE)",
                TRANSACTION_STATE_TOPIC,
                partition,
                exc,
                # Disk damage is named; anything else is our bug, its traceback wanted.
                exc_info=not isinstance(exc, CorruptLog),
            )
            coordinator.unavailable.add(partition)
            broker.data.unavailable[(TRANSACTION_STATE_TOPIC, partition)] = (
                ErrorCode.KAFKA_STORAGE_ERROR
            )
            continue
        for tid, value in decoded:
            coordinator.load(tid, value)
        broker.data.install(topic, partition, plog)
    log.info(
        "loaded %d transactional ids (%d open) from %s",
        len(coordinator.txns),
        sum(1 for txn in coordinator.txns.values() if txn.state != "Empty" and txn.partitions),
        TRANSACTION_STATE_TOPIC,
    )


def settle_left_open(
    broker: Broker, state: PartitionState, replay: PartitionReplay | None = None
) -> None:
    """The transactions this partition's log left open: kept while the coordinator holds
    them (with their pending offsets, for an offsets partition), aborted otherwise."""
    coordinator = broker.loaded_transactions
    tp = (state.topic.name, state.index)
    now = broker.now()
    for pid in list(state.txns.open):
        if coordinator is not None and coordinator.holds(pid, tp):
            if replay is not None:
                _restore_pending(broker, replay, pid)
            continue
        entry = state.producers.producers.get(pid)
        epoch = entry.epoch if entry is not None else 0
        log.warning(
            "%s-%d: producer %d's transaction from before the restart aborted "
            "(no transaction coordinator holds it)",
            state.topic.name,
            state.index,
            pid,
        )
        broker.data.write_marker(state, pid, epoch, False, now)
    broker.apply(Result(None, [], []))


def _restore_pending(broker: Broker, replay: PartitionReplay, producer_id: int) -> None:
    coordinator = broker.coordinator
    pending = coordinator.pending_txn_offsets()
    for group, tp, offset, record_offset, superseded in replay.pending_offsets(producer_id):
        before = _SUPERSEDED if superseded else coordinator.offsets.get(group, tp)
        pending.add(producer_id, group, tp, offset, record_offset, before)


def finish_loading(broker: Broker) -> None:
    """Every log is loaded: the coordinator serves, and completes what a crash left
    prepared."""
    coordinator = broker.loaded_transactions
    if coordinator is None:
        return
    coordinator.loading = False
    complete_in_flight(broker)
