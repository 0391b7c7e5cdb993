"""The transaction coordinator's writes on this node: its `__transaction_state` records, and
ending a transaction in Kafka's two steps.

First the PrepareCommit or PrepareAbort record is made durable; then the markers go to each
partition of the transaction, the `__consumer_offsets` partition of each group it committed
offsets for among them (which makes those offsets the groups' or drops them); once those are
durable the CompleteCommit or CompleteAbort record is written, and the producer's answer goes
after it. (Kafka's coordinator sends WriteTxnMarkers to the partitions' leaders, all of which
are this node here.) A crash before the markers are durable leaves the prepared record, and
the restarted server writes them again (`complete_in_flight`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minicoord.protocol.records import Record
from minicoord.server.coordinator.results import Result
from minicoord.server.topics import OFFSETS_TOPIC
from minicoord.server.transactions.coordinator import Ended

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

log = logging.getLogger("minicoord.transactions")


def persist(broker: Broker) -> None:
    """The records of the ids whose state changed, one batch per partition."""
    coordinator = broker.transactions
    if not coordinator.changed:
        return
    changed = list(coordinator.changed)
    coordinator.changed.clear()
    by_partition: dict[int, list[Record]] = {}
    for tid in changed:
        partition, key, value = coordinator.record(tid)
        by_partition.setdefault(partition, []).append(Record(key, value))
    topics = broker.topics
    if not topics.transaction_state_exists:
        # Written to without a FindCoordinator (embedded use).
        broker.create_transaction_state_topic()
    now = broker.now()
    for partition, records in by_partition.items():
        state = broker.data.partition(topics.transaction_state, partition)
        # An unavailable partition's ids are refused before they change (`refused`).
        assert state is not None, f"__transaction_state-{partition} is not served"
        broker.data.append_records(state, records, now)


class _Then:
    """A reply slot that runs the next step once what came before it is durable."""

    __slots__ = ("step",)

    def __init__(self, step: Callable[[], None]) -> None:
        self.step = step

    def resolve(self, _outcome: Any) -> None:
        self.step()


def end(broker: Broker, ended: Ended, reply: Any = None) -> None:
    """The prepared record (written now, with any other change), then the markers."""
    persist(broker)
    broker.apply(Result(None, [], []), _Then(lambda: complete(broker, ended, reply)))


def complete(broker: Broker, ended: Ended, reply: Any = None) -> None:
    """The second step: the markers, then the completed record; `reply` after both."""
    now = broker.now()
    write_markers(broker, ended, now)
    broker.transactions.complete(ended, now)
    persist(broker)
    broker.apply(Result(None, [], []), reply)


def complete_in_flight(broker: Broker) -> None:
    """At start, once every log is loaded: the transactions a crash left prepared."""
    for ended in broker.transactions.in_flight():
        log.info(
            "transaction %r of producer %d was %s when the server stopped: completing it",
            ended.transactional_id,
            ended.producer_id,
            "committing" if ended.commit else "aborting",
        )
        complete(broker, ended)


def write_markers(broker: Broker, ended: Ended, now: int) -> None:
    data = broker.data
    coordinator = broker.coordinator
    offsets_exist = broker.topics.offsets_topic_exists
    for name, index in ended.partitions:
        if name == OFFSETS_TOPIC:
            # Where its TxnOffsetCommit wrote (Kafka marks every group's partition added, an
            # empty transaction there included; that marker ends nothing).
            state = data.partition(broker.topics.offsets, index) if offsets_exist else None
            if state is not None and ended.producer_id in state.txns.open:
                data.write_marker(state, ended.producer_id, ended.epoch, ended.commit, now)
            continue
        topic = broker.topics.get(name)
        state = data.partition(topic, index) if topic is not None else None
        if state is None:
            # Deleted since it was added (Kafka's marker write finds no such partition and
            # drops it), or not loaded: a partition still loading keeps the transaction open
            # while the coordinator holds it, and the completion at the end of loading
            # writes its marker.
            log.info(
                "transaction %r: no marker for %s-%d (not served now)",
                ended.transactional_id,
                name,
                index,
            )
            continue
        data.write_marker(state, ended.producer_id, ended.epoch, ended.commit, now)
    pending = coordinator.txn_offsets
    if pending is not None:
        pending.complete(coordinator.offsets, ended.producer_id, ended.commit)
