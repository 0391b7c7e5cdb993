"""Ending a transaction on this node: its markers in each partition it wrote to, and its
offsets in each group it committed for (Kafka's coordinator sends WriteTxnMarkers to the
partitions' leaders, all of which are this node here)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minicoord.server.coordinator.results import Effects, Result
from minicoord.server.transactions.coordinator import Ended

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

log = logging.getLogger("minicoord.transactions")


def finish(broker: Broker, ended: Ended, now: int) -> Result[None]:
    fx = Effects()
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
    pending = coordinator.txn_offsets
    for group in ended.groups if pending is not None else ():
        pending.complete(
            fx,
            coordinator.offsets,
            coordinator.partition_for,
            group,
            ended.producer_id,
            ended.commit,
        )
    return fx.result(None)
