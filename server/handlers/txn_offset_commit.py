"""TxnOffsetCommit (key 28), versions 0-4: offsets committed inside a producer's transaction
(consume-transform-produce). As Kafka's coordinator writes them, their records go to the
group's `__consumer_offsets` partition in a transactional batch of the producer's, answered
once durable; they become the group's committed offsets when the transaction commits and are
dropped when it aborts (coordinator/txn_offsets.py); until then OffsetFetch with
require_stable answers UNSTABLE_OFFSET_COMMIT for their partitions.

As Kafka: with ACLs, Write on the transactional id, Read on the group, Read on each topic;
unknown topics UNKNOWN_TOPIC_OR_PARTITION; the group must have been added to the open
transaction (AddOffsetsToTxn, else INVALID_TXN_STATE; an older epoch INVALID_PRODUCER_EPOCH);
v3's generation and member id are checked as OffsetCommit checks them, a stale one being
ILLEGAL_GENERATION (Kafka's validateTransactionalOffsetCommit); metadata longer than
offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE. v3 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import TxnOffsetCommitResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record, offset_commit_key, offset_commit_value
from minicoord.server.coordinator.offset_requests import metadata_too_long
from minicoord.server.coordinator.offsets import CommittedOffset, TopicPartition
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import OFFSETS_TOPIC
from minicoord.server.transactions.answers import after_writes

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

API_KEY = 28
TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TopicResponse.TxnOffsetCommitResponsePartition


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    tid, group = request.transactional_id, request.group_id
    topics = [(t.name, t.partitions) for t in request.topics]
    errors: dict[tuple[str, int], ErrorCode] = {}

    def answer() -> Any:
        return TxnOffsetCommitResponse(
            version=version,
            throttle_time_ms=0,
            topics=[
                TopicResponse(
                    name=name,
                    partitions=[
                        PartitionResponse(
                            partition_index=p.partition_index,
                            error_code=errors[name, p.partition_index],
                        )
                        for p in parts
                    ],
                )
                for name, parts in topics
            ],
        )

    def all_fail(error: ErrorCode) -> Any:
        for name, parts in topics:
            for p in parts:
                errors[name, p.partition_index] = error
        return answer()

    if broker.authorizer is not None:
        if not authorize.allowed(ctx, authorize.WRITE, authorize.TRANSACTIONAL_ID, tid):
            return all_fail(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if authorize.group_denied(ctx, group):
            return all_fail(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = (
        authorize.denied_topics(ctx, authorize.READ, (name for name, _ in topics))
        if broker.authorizer is not None
        else set()
    )
    wanted = []
    for name, parts in topics:
        topic = broker.topics.get(name)
        for p in parts:
            index = p.partition_index
            if name in denied:
                errors[name, index] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= index < topic.partitions:
                errors[name, index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append((name, p))
    if not wanted:
        return answer()
    coordinator = broker.coordinator
    now = broker.now()
    error = broker.transactions.in_transaction(
        tid,
        request.producer_id,
        request.producer_epoch,
        (OFFSETS_TOPIC, coordinator.partition_for(group)),
    )
    if error is ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    if error is ErrorCode.NONE:
        if version >= 3:
            refusal = coordinator.txn_commit_refused(
                now, group, request.generation_id, request.member_id, request.group_instance_id
            )
        else:
            refusal = coordinator.txn_commit_refused(now, group, -1, "", None)
        error = refusal or ErrorCode.NONE
    limit = broker.config.offset_metadata_max_bytes
    accepted: list[tuple[TopicPartition, CommittedOffset]] = []
    for name, p in wanted:
        key = (name, p.partition_index)
        if error is not ErrorCode.NONE:
            errors[key] = error
            continue
        metadata = p.committed_metadata or ""
        if metadata_too_long(metadata, limit):
            errors[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            continue
        epoch = p.committed_leader_epoch if version >= 2 else -1
        accepted.append((key, CommittedOffset(p.committed_offset, epoch, metadata, now)))
        errors[key] = ErrorCode.NONE
    if not accepted:
        return answer()
    _write(broker, group, request.producer_id, request.producer_epoch, accepted, now)
    return after_writes(ctx, Result(None, [], []), lambda _: answer())


def _write(
    broker: Broker,
    group: str,
    producer_id: int,
    epoch: int,
    accepted: list[tuple[TopicPartition, CommittedOffset]],
    now: int,
) -> None:
    """The offsets' records, in one transactional batch of the producer's in the group's
    offsets partition, and pending until the transaction ends."""
    coordinator = broker.coordinator
    partition = coordinator.partition_for(group)
    if not broker.topics.offsets_topic_exists:
        broker.create_offsets_topic(partition)
    state = broker.data.partition(broker.topics.offsets, partition)
    # The group's partition is served: txn_commit_refused answered its unavailability.
    assert state is not None, f"offsets partition {partition} is not served"
    records = [
        Record(
            offset_commit_key(group, topic, index),
            offset_commit_value(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp),
        )
        for (topic, index), o in accepted
    ]
    base = broker.data.append_coordinator_txn(state, records, producer_id, epoch, now)
    pending = coordinator.pending_txn_offsets()
    committed = coordinator.offsets
    for i, (tp, offset) in enumerate(accepted):
        pending.add(producer_id, group, tp, offset, base + i, committed.get(group, tp))


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=4)
