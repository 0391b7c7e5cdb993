"""Share groups' delivery state across restarts: `__share_group_state`, as Kafka's share
coordinator keeps it.

On a server with a data directory, each share partition whose kept state changed (its start
offset, the records past it that are done or were delivered and came back) is written as a
ShareSnapshot record, keyed by group, topic id and partition, to the partition of
`__share_group_state` Kafka's ShareCoordinatorService.partitionFor names (the Java hash of
"group:topicId:partition"); a share partition that goes (its group or topic deleted, its
offsets deleted) gets a tombstone. The topic is compacted, so a key's last record is its state.
An acknowledgement is answered once its record is as durable as the flush policy says.

At start the last record of each key makes the share partition again: the start offset and
the records done stay done, the ones delivered before keep their delivery count, and those
held by a member when the server stopped are available again (their locks did not outlive
it). Its group is made again, Empty until its members rejoin. Kafka writes a snapshot now and
then and small updates between; minicoord writes the whole window each time, which the
in-flight limit keeps small. An in-memory server keeps no state: nothing of it outlives the
process anyway.
"""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING

from minicoord.protocol.records import Record
from minicoord.server.coordinator.partitioning import partition_for
from minicoord.server.topics import SHARE_STATE_TOPIC
from minicoord.storage.log_loader import CorruptLog

if TYPE_CHECKING:
    import uuid

    from minicoord.server.broker import Broker

log = logging.getLogger("minicoord.loading")


def state_partition(group: str, topic_id: uuid.UUID, index: int, partitions: int) -> int:
    """Kafka's SharePartitionKey.asCoordinatorKey, hashed as a group id is."""
    topic = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return partition_for(f"{group}:{topic}:{index}", partitions)


def persist(broker: Broker) -> bool:
    """Append the records of the share partitions whose kept state changed; True if any were
    (an answer applied after this waits for them)."""
    shares = broker.__dict__.get("shares")
    if shares is None or not shares.dirty:
        return False
    from minicoord.protocol import share_state_records as ssr

    dirty, shares.dirty = shares.dirty, {}
    topics = broker.topics
    if not topics.share_state_exists:
        broker.create_share_state_topic()
    topic = topics.share_state
    now = broker.now()
    by_partition: dict[int, list[Record]] = {}
    for (group, topic_id, index), sp in dirty.items():
        key = ssr.encode_key(group, topic_id, index)
        value = None
        if sp is not None:
            value = ssr.encode_value(sp.start, sp.state_batches(), sp.done_in_flight(), now, now)
        partition = state_partition(group, topic_id, index, topic.partitions)
        by_partition.setdefault(partition, []).append(Record(key, value))
    for partition, records in by_partition.items():
        state = broker.data.partition(topic, partition)
        if state is None:
            # Failed to load at start (logged then): what it would keep is lost at the next.
            log.error("%s-%d is not served: share state not kept", SHARE_STATE_TOPIC, partition)
            continue
        broker.data.append_records(state, records, now)
    return True


def load(broker: Broker, on_disk: list[int]) -> None:
    """Read `__share_group_state` into the share partitions (blocking, before the listener)."""
    from minicoord.protocol import share_state_records as ssr
    from minicoord.server.coordinator.share.groups import ShareGroup

    topics = broker.topics
    if not topics.share_state_exists:
        # Written by a minicoord that did not record the topic: taken to have the count
        # configured now, and recorded with it.
        broker.create_share_state_topic()
    topic = topics.share_state
    shares = broker.shares
    groups = broker.coordinator.shares.groups
    segment_bytes = topics.config_of(topic).segment_bytes
    kept = 0
    for partition in on_disk:
        if partition >= topic.partitions:
            log.error("%s-%d is beyond the topic's partitions: left alone", topic.name, partition)
            continue
        try:
            plog = broker.logs.open_log(topic.name, partition, segment_bytes)
            try:
                latest: dict[bytes, bytes | None] = {}
                for record in plog.records():
                    latest[record.key] = record.value
                states = [
                    (ssr.decode_key(key), ssr.decode_value(value))
                    for key, value in latest.items()
                    if value is not None
                ]
            except Exception:
                plog.close()
                raise
        except Exception as exc:
            log.error(
                "%s-%d is not served: %s (share groups start its partitions again)",
                topic.name,
                partition,
                exc,
                exc_info=not isinstance(exc, CorruptLog),
            )
            continue
        for key, (start, batches) in states:
            shares.made(key, start).restore(batches)
            # Its group is back too, Empty until its members rejoin: listed, described and
            # deletable as on Kafka, whose groups outlive a restart.
            groups.setdefault(key[0], ShareGroup(key[0]))
            kept += 1
        broker.data.install(topic, partition, plog)
    shares.dirty.clear()  # read back, not changed
    log.info("loaded the delivery state of %d share partitions from %s", kept, topic.name)
