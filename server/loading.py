"""Replaying the offsets log into the coordinator at start, without blocking the server.

Every partition found on disk is marked loading before the listener opens; partitions are
then read and verified one at a time in a worker thread and installed on the event loop.
Meanwhile the server answers everything else, and a group whose partition is still loading
gets COORDINATOR_LOAD_IN_PROGRESS (clients retry). A partition whose log is corrupt before
valid data is not served (COORDINATOR_NOT_AVAILABLE) and the others carry on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time

from minicoord.server.broker import Broker
from minicoord.server.coordinator.replay import PartitionReplay
from minicoord.storage.log import DurableStore
from minicoord.storage.partition_log import CorruptLog

log = logging.getLogger("minicoord.loading")


def read_partition(store: DurableStore, partition: int) -> PartitionReplay:
    """Open, verify and read one partition (blocking: runs in a worker thread)."""
    plog = store.open_partition(partition)
    replay = PartitionReplay(partition)
    for record in plog.read():
        replay.add(record.key, record.value)
    replay.decode()
    return replay


async def load_partitions(
    broker: Broker,
    store: DurableStore,
    partitions: list[int],
    pool: concurrent.futures.Executor,
) -> None:
    loop = asyncio.get_running_loop()
    for partition in partitions:
        started = time.perf_counter()
        try:
            replay = await loop.run_in_executor(pool, read_partition, store, partition)
        except CorruptLog as exc:
            log.error(
                "offsets partition %d is not served: %s (its groups get "
                "COORDINATOR_NOT_AVAILABLE; `minicoord log verify` reports the damage)",
                partition,
                exc,
            )
            broker.coordinator.fail_loading(partition)
            continue
        broker.coordinator.finish_loading(replay, broker.now())
        broker.rearm()
        log.info(
            "loaded offsets partition %d: %d records, %d groups, %d offsets in %.0f ms",
            partition,
            replay.records,
            len(replay.groups),
            len(replay.offsets),
            (time.perf_counter() - started) * 1000,
        )
