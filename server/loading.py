"""Opening the logs found on disk at start, without blocking the server.

The cluster metadata log is replayed first, before the listener opens (it is small and says
which topics exist), then `__transaction_state` (small too, and what every partition with a
transaction left open is settled against: transactions/loading.py) and `__share_group_state`
(the share groups' delivery state: data/share_state.py). Every other log is then
marked unavailable and opened in a worker thread, one at a time, and installed on the event
loop: `__consumer_offsets` partitions first
(their records are replayed into the coordinator; meanwhile their groups get
COORDINATOR_LOAD_IN_PROGRESS), then topic partitions (their producer state is rebuilt from
batch headers; meanwhile Produce requests naming them wait, in order (data/produce_gate.py),
and their other requests get NOT_LEADER_OR_FOLLOWER, which clients retry).
A log whose damage cannot be repaired is not served (COORDINATOR_NOT_AVAILABLE for groups,
KAFKA_STORAGE_ERROR for a topic partition) and the rest carry on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.broker import Broker
from minicoord.server.coordinator.replay import PartitionReplay
from minicoord.server.data.producers import ProducerStates
from minicoord.server.topics import (
    METADATA_TOPIC,
    OFFSETS_TOPIC,
    SHARE_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    Topic,
)
from minicoord.storage import producer_snapshots
from minicoord.storage.batch import CONTROL, TRANSACTIONAL, BatchInfo, batch_info, decode_batch
from minicoord.storage.log import LogManager, StoreError
from minicoord.storage.log_loader import CorruptLog
from minicoord.storage.partition_log import PartitionLog
from minicoord.storage.txn_index import PartitionTxns

if TYPE_CHECKING:
    from minicoord.server.storage_thread import StorageThread

log = logging.getLogger("minicoord.loading")


def read_offsets_partition(
    logs: LogManager, partition: int, segment_bytes: int
) -> tuple[PartitionLog, PartitionReplay, ProducerStates, PartitionTxns]:
    """Open, verify and read one offsets partition (blocking: runs in a worker thread)."""
    producers, txns, on_batch = _producer_state()
    plog = logs.open_log(OFFSETS_TOPIC, partition, segment_bytes, on_batch)
    txns.resolve_from(plog)
    replay = PartitionReplay(partition)
    for data in plog.batches():
        info = batch_info(data)
        if info.attributes & CONTROL:
            from minicoord.storage.control_batch import COMMIT, marker_type

            replay.end_transaction(info.producer_id, marker_type(data) == COMMIT)
        elif info.attributes & TRANSACTIONAL:
            for record in decode_batch(data):
                replay.add_transactional(info.producer_id, record.key, record.value, record.offset)
        else:
            for record in decode_batch(data):
                replay.add(record.key, record.value, record.offset)
    replay.decode()
    return plog, replay, producers, txns


def _producer_state() -> tuple[ProducerStates, PartitionTxns, Callable[[BatchInfo], None]]:
    """Producer and transaction state, rebuilt from the batch headers as a log opens."""
    producers = ProducerStates()
    txns = PartitionTxns()

    def on_batch(info: BatchInfo) -> None:
        producers.load(info)
        txns.load(info)

    return producers, txns, on_batch


def open_topic_partition(
    logs: LogManager, topic: Topic, index: int, segment_bytes: int
) -> tuple[PartitionLog, ProducerStates, PartitionTxns]:
    producers, txns, on_batch = _producer_state()
    plog = logs.open_log(topic.name, index, segment_bytes, on_batch)
    if plog.directory is not None:
        snapshot = producer_snapshots.latest(plog.directory, plog.next_offset)
        if snapshot is not None:
            producers.merge_snapshot(*snapshot)
    txns.resolve_from(plog)
    return plog, producers, txns


def plan_loading(broker: Broker) -> tuple[list[int], list[tuple[Topic, int]]]:
    """Mark what must load before it is served; the offsets partitions and topic partitions."""
    on_disk = broker.logs.on_disk()
    partitions = sorted(p for name, p in on_disk if name == OFFSETS_TOPIC)
    _use_offsets_partitions(broker, partitions)
    transaction_state = sorted(p for name, p in on_disk if name == TRANSACTION_STATE_TOPIC)
    if transaction_state or broker.topics.transaction_state_exists:
        from minicoord.server.transactions.loading import load_transaction_state

        load_transaction_state(broker, transaction_state)
    share_state = sorted(p for name, p in on_disk if name == SHARE_STATE_TOPIC)
    if share_state:
        from minicoord.server.data.share_state import load as load_share_state

        load_share_state(broker, share_state)
    for partition in partitions:
        broker.coordinator.begin_loading(partition)
        broker.data.unavailable[(OFFSETS_TOPIC, partition)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    topic_partitions = []
    for topic in broker.topics.user_topics():
        for index in range(topic.partitions):
            if (topic.name, index) in broker.data.partitions:
                continue  # created at this start (--topic)
            broker.data.unavailable[(topic.name, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            topic_partitions.append((topic, index))
    if topic_partitions:
        from minicoord.server.data.produce_gate import ProduceGate

        loading = {(topic.name, index) for topic, index in topic_partitions}
        broker.data.produce_gate = ProduceGate(loading, broker.topics)
    broker.loading_logs = bool(partitions or topic_partitions)
    if broker.loaded_transactions is not None:
        broker.loaded_transactions.loading = broker.loading_logs
    served = set(broker.data.partitions) | set(broker.data.unavailable)
    for name, index in on_disk:
        if name != METADATA_TOPIC and (name, index) not in served:
            log.warning(
                "%s-%d in %s belongs to no topic in the cluster metadata; left alone",
                name,
                index,
                broker.logs.data_dir,
            )
    return partitions, topic_partitions


def _use_offsets_partitions(broker: Broker, on_disk: list[int]) -> None:
    """Map groups onto the partitions of `__consumer_offsets` as its metadata records made it,
    or offsets.topic.num.partitions for a topic yet to be made. As in Kafka, changing the
    config later does not move groups (their commits would be looked for where they are not)."""
    topics, configured = broker.topics, broker.config.offsets_topic_num_partitions
    count = topics.offsets.partitions if topics.offsets_topic_exists else configured
    beyond = [p for p in on_disk if p >= count]
    if beyond:
        raise StoreError(
            f"{broker.logs.data_dir} holds offsets partition {max(beyond)} but "
            f"__consumer_offsets has {count} partitions"
        )
    if topics.offsets_topic_exists:
        if count != configured:
            log.warning(
                "offsets.topic.num.partitions is %d but __consumer_offsets was made with %d "
                "partitions: groups stay where they are, as in Kafka",
                configured,
                count,
            )
    elif on_disk:
        # Made by a minicoord that did not record the topic: taken to have the count
        # configured now (a smaller one was refused above), and recorded with it.
        topics.create_offsets_topic()
        broker.persist_metadata(topics.offsets_records())
    broker.coordinator.use_offsets_partitions(count)


async def load_logs(
    broker: Broker,
    offsets_partitions: list[int],
    topic_partitions: list[tuple[Topic, int]],
    storage: StorageThread,
) -> None:
    logs = broker.logs
    segment_bytes = broker.config.offsets_topic_segment_bytes
    for partition in offsets_partitions:
        started = time.perf_counter()
        opened: PartitionLog | None = None
        try:
            opened, replay, producers, txns = await storage.run(
                read_offsets_partition, logs, partition, segment_bytes
            )
            loaded = broker.coordinator.finish_loading(replay, broker.now())
        except Exception as exc:
            if opened is not None:
                opened.close()  # read, but its records did not replay
            _offsets_not_served(broker, partition, exc)
            continue
        plog = opened
        assert plog is not None
        state = broker.data.install(broker.topics.offsets, partition, plog, producers, txns)
        broker.apply(loaded)
        broker.rearm()
        if txns.open:
            # Offsets of transactions open at the restart: pending again, or dropped.
            from minicoord.server.transactions.loading import settle_left_open

            settle_left_open(broker, state, replay)
        log.log(
            logging.INFO if replay.records else logging.DEBUG,
            "loaded offsets partition %d: %d records, %d groups, %d offsets in %.0f ms",
            partition,
            replay.records,
            len(replay.groups)
            + sum(1 for r in replay.consumer_groups.values() if r.epoch is not None),
            len(replay.offsets),
            (time.perf_counter() - started) * 1000,
        )
    for topic, index in topic_partitions:
        await _load_topic_partition(broker, topic, index, storage)
        gate = broker.data.produce_gate
        if gate is not None:  # the Produce requests that waited for it can go on
            gate.loaded((topic.name, index))
    broker.data.produce_gate = None
    broker.loading_logs = False
    if broker.loaded_transactions is not None:
        from minicoord.server.transactions.loading import finish_loading

        finish_loading(broker)
        broker.rearm()


async def _load_topic_partition(
    broker: Broker, topic: Topic, index: int, storage: StorageThread
) -> None:
    logs = broker.logs
    if broker.topics.get(topic.name) is not topic:
        return  # deleted while loading
    started = time.perf_counter()
    try:
        plog, producers, txns = await storage.run(
            open_topic_partition, logs, topic, index, broker.data.segment_bytes(topic)
        )
    except Exception as exc:
        # One partition that cannot be read is not served; the rest load and serve.
        log.error(
            "%s-%d is not served: %s (its requests get KAFKA_STORAGE_ERROR; "
            "`minicoord log verify` reports the damage)",
            topic.name,
            index,
            _reason(exc),
            exc_info=not isinstance(exc, CorruptLog),
        )
        broker.data.unavailable[(topic.name, index)] = ErrorCode.KAFKA_STORAGE_ERROR
        return
    if broker.topics.get(topic.name) is not topic:
        plog.close()
        return
    # As Kafka loads a snapshot: producers already past their expiration stay forgotten.
    producers.expire(broker.now(), broker.config.producer_id_expiration_ms)
    state = broker.data.install(topic, index, plog, producers, txns)
    if txns.open:
        from minicoord.server.transactions.loading import settle_left_open

        settle_left_open(broker, state)
    log.debug(
        "loaded %s-%d: offsets %d-%d, %d bytes in %.0f ms",
        topic.name,
        index,
        plog.log_start_offset,
        plog.next_offset,
        plog.size_bytes,
        (time.perf_counter() - started) * 1000,
    )


def _offsets_not_served(broker: Broker, partition: int, exc: Exception) -> None:
    """An offsets partition whose log is damaged, or whose records do not replay (which
    Kafka's loader also gives up on), is not served; the other partitions load and serve."""
    log.error(
        "offsets partition %d is not served: %s (its groups get COORDINATOR_NOT_AVAILABLE; "
        "`minicoord log verify` reports the damage)",
        partition,
        _reason(exc),
        # A record that does not replay is our bug, not the disk's: its traceback is wanted.
        exc_info=not isinstance(exc, CorruptLog),
    )
    broker.coordinator.fail_loading(partition)
    broker.data.unavailable[(OFFSETS_TOPIC, partition)] = ErrorCode.KAFKA_STORAGE_ERROR


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, CorruptLog) else f"loading it failed ({exc!r})"
