"""TxnOffsetCommit (key 28), versions 0-4: offsets committed inside a producer's transaction
(consume-transform-produce). They become the group's committed offsets when the transaction
commits and are dropped when it aborts (coordinator/txn_offsets.py); until then OffsetFetch
with require_stable answers UNSTABLE_OFFSET_COMMIT for their partitions.

As Kafka: with ACLs, Write on the transactional id, Read on the group, Read on each topic;
unknown topics UNKNOWN_TOPIC_OR_PARTITION; the group must have been added to the open
transaction (AddOffsetsToTxn, else INVALID_TXN_STATE; an older epoch INVALID_PRODUCER_EPOCH);
v3's generation and member id are checked as OffsetCommit checks them, a stale one being
ILLEGAL_GENERATION (Kafka's validateTransactionalOffsetCommit); metadata longer than
offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE. v3 is flexible.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import TxnOffsetCommitResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offset_requests import metadata_too_long
from minicoord.server.coordinator.offsets import CommittedOffset
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

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
        tid, request.producer_id, request.producer_epoch, group
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
        coordinator.pending_txn_offsets().add(
            group,
            request.producer_id,
            key,
            CommittedOffset(p.committed_offset, epoch, metadata, now),
        )
        errors[key] = ErrorCode.NONE
    return answer()


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=4)
