"""Ending a transaction on this node: its markers in each partition it wrote to, and in the
`__consumer_offsets` partition of each group it committed offsets for, which makes those
offsets the groups' or drops them (Kafka's coordinator sends WriteTxnMarkers to the
partitions' leaders, all of which are this node here; a group's offsets partition is one of
the transaction's partitions from AddOffsetsToTxn on)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minicoord.server.coordinator.results import Result
from minicoord.server.transactions.coordinator import Ended

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

log = logging.getLogger("minicoord.transactions")


def finish(broker: Broker, ended: Ended, now: int) -> Result[None]:
    data = broker.data
    for name, index in ended.partitions:
        topic = broker.topics.get(name)
        state = data.partition(topic, index) if topic is not None else None
        if state is None:
            # Deleted since it was added (Kafka's marker write finds no such partition and
            # drops it), or not loaded: a partition still loading has the marker written
            # when its log opens, as every transaction left open there is aborted.
            log.info(
                "transaction %r: no marker for %s-%d (not served now)",
                ended.transactional_id,
                name,
                index,
            )
            continue
        data.write_marker(state, ended.producer_id, ended.epoch, ended.commit, now)
    coordinator = broker.coordinator
    offsets = broker.topics.offsets
    for partition in sorted({coordinator.partition_for(group) for group in ended.groups}):
        # Where its TxnOffsetCommit wrote (Kafka marks every group's partition added, an
        # empty transaction there included; that marker ends nothing).
        state = data.partition(offsets, partition) if broker.topics.offsets_topic_exists else None
        if state is not None and ended.producer_id in state.txns.open:
            data.write_marker(state, ended.producer_id, ended.epoch, ended.commit, now)
    pending = coordinator.txn_offsets
    if pending is not None:
        pending.complete(coordinator.offsets, ended.producer_id, ended.commit)
    # Nothing of its own to persist: the markers are appended, and a reply applied with this
    # waits for them.
    return Result(None, [], [])
