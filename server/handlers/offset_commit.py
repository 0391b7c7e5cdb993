"""OffsetCommit (key 8), versions 2-10 (Kafka 4 dropped 0-1).

v2-4 carry a retention time: other than -1 (the default, which since KIP-211 leaves retention
to the group's offsets.retention.minutes), it sets when that offset expires, as Kafka's
OffsetMetadataManager keeps it (sarama sends one when Consumer.Offsets.Retention is set);
v6 adds leader epochs; v7 group.instance.id; v8 is flexible; v10
names topics by id. Partitions of topics this cluster does not have are answered
UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an unknown id; a known topic's missing
partition is UNKNOWN_TOPIC_OR_PARTITION either way), as Kafka does; the rest are validated
against the group and committed together, persisted before the reply.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_offset_commit
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_offset_commit import OneCommit
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 8
TOPIC = ResourceType.TOPIC


def handle(ctx: RequestContext, request: Any) -> Any:
    if type(request) is OneCommit and ctx.broker.authorizer is None:
        return _one_partition(ctx, request)
    return _any(ctx, request)


def _one_partition(ctx: RequestContext, request: OneCommit) -> Any:
    """Nearly every commit: one partition of one topic, no ACLs. The rules of `_any`
    without its bookkeeping; a partition this cannot commit (an unknown topic or partition)
    sends the request the general way."""
    header = ctx.header
    version = header.api_version
    broker = ctx.broker
    known = broker.topics.get(request.name)
    index = request.partition_index
    if known is None or not 0 <= index < known.partitions:
        return _any(ctx, request)
    # The record goes straight onto the broker's pending ones: no Result per commit.
    error = broker.coordinator.commit_one(
        broker.pending_records,
        broker.now(),
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        known.name,
        index,
        request.committed_offset,
        request.committed_leader_epoch,
        version,
    )
    response = EncodedResponse(
        fast_offset_commit.encode_one(version, request.name, None, index, error),
        0,
        (error,) if error else (),
    )
    if not error and broker.write_before_answer(ctx.channel):  # NONE is 0
        return response
    # Refused (nothing written), or a record to wait for (an fsync, an answer off the turn):
    # its record is already pending, so `_answer` parks the answer behind it.
    return _answer(ctx, response, Result(error, [], []))


def _any(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    registry = broker.topics
    by_id = version >= 10
    missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Per request topic: its partitions' errors decided here, None where the coordinator's
    # decides.
    slots: list[tuple[Any, list[ErrorCode | None]]] = []
    entries: list[OffsetCommitEntry] = []
    # With ACLs, Kafka wants Read on the group (else every partition fails) and Read on each
    # topic, checked before whether the topic exists.
    checked = broker.authorizer is not None
    group_denied = checked and authorize.group_denied(ctx, request.group_id)
    with_epoch = version >= 6
    for t in request.topics:
        known = registry.by_id(t.topic_id) if by_id else registry.get(t.name)
        if checked:
            name = known.name if by_id and known is not None else t.name
            if group_denied:
                refusal: ErrorCode | None = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif name is not None and not authorize.allowed(ctx, authorize.READ, TOPIC, name):
                refusal = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                refusal = None
            if refusal is not None:
                slots.append((t, [refusal] * len(t.partitions)))
                continue
        decided: list[ErrorCode | None] = []
        for p in t.partitions:
            if known is None:
                decided.append(missing)
                continue
            if not 0 <= p.partition_index < known.partitions:
                # A known topic (by name or id) without that partition, as Kafka's KafkaApis.
                decided.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            decided.append(None)
            entries.append(
                OffsetCommitEntry(
                    known.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if with_epoch else -1,
                    p.committed_metadata,
                )
            )
        slots.append((t, decided))

    result = None
    if entries:
        result = broker.coordinator.commit_offsets(
            broker.now(),
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            request.group_instance_id if version >= 7 else None,
            entries,
            version,
            # Never a OneCommit here at these versions (those are v8-9).
            request.retention_time_ms if version <= 4 else -1,
        )
        coordinator_errors = iter(result.value)
    topics = [
        (
            t.name,
            t.topic_id,
            [
                (p.partition_index, error if error is not None else next(coordinator_errors))
                for p, error in zip(t.partitions, decided, strict=True)
            ],
        )
        for t, decided in slots
    ]
    # Packed by hand (byte-equal to the generated encoder, see its tests): the answer to
    # every commit, built without a message object per partition.
    # The partitions' errors ride along only for the errors metric, when it is on.
    errors = (
        tuple(e for _, _, parts in topics for _, e in parts if e)
        if broker.metrics is not None
        else ()
    )
    response = EncodedResponse(fast_offset_commit.encode_response(version, topics), 0, errors)
    if result is None:
        # Every partition refused here: nothing written, nothing to wait for.
        return response
    return _answer(ctx, response, result)


def _answer(ctx: RequestContext, response: EncodedResponse, result: Result[Any]) -> Any:
    broker = ctx.broker
    if broker.settled(result):
        # Nothing written (the group refused the commit) behind an idle log.
        return response
    # The answer waits for the commit's records to be as durable as the flush policy says.
    parked = ctx.hold(response)
    broker.apply(result, parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, decode=fast_offset_commit.decode_request)
