"""OffsetCommit (key 8), versions 2-10 (Kafka 4 dropped 0-1).

v2-4 carry a retention time, ignored as Kafka has since 2.1 (KIP-211: retention runs from
when the group empties); v6 adds leader epochs; v7 group.instance.id; v8 is flexible; v10
names topics by id. Partitions of topics this cluster does not have are answered
UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id), as Kafka does; the rest are validated
against the group and committed together, persisted before the reply.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_offset_commit
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 8
TOPIC = ResourceType.TOPIC


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    registry = broker.topics
    by_id = version >= 10
    # Per request partition: the error decided here, or None to take the coordinator's.
    slots: list[tuple[Any, Any, list[ErrorCode | None]]] = []
    entries: list[OffsetCommitEntry] = []
    # With ACLs, Kafka wants Read on the group (else every partition fails) and Read on each
    # topic, checked before whether the topic exists.
    checked = broker.authorizer is not None
    group_denied = checked and authorize.group_denied(ctx, request.group_id)
    for t in request.topics:
        known = registry.by_id(t.topic_id) if by_id else registry.get(t.name)
        missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        decided: list[ErrorCode | None] = []
        if checked:
            name = known.name if by_id and known is not None else t.name
            if group_denied:
                refusal: ErrorCode | None = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif name is not None and not authorize.allowed(ctx, authorize.READ, TOPIC, name):
                refusal = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                refusal = None
            if refusal is not None:
                slots.append((t, known, [refusal] * len(t.partitions)))
                continue
        for p in t.partitions:
            if known is None or not 0 <= p.partition_index < known.partitions:
                decided.append(missing)
                continue
            decided.append(None)
            entries.append(
                OffsetCommitEntry(
                    known.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.committed_metadata,
                )
            )
        slots.append((t, known, decided))

    def build(errors: list[ErrorCode]) -> Any:
        coordinator_errors = iter(errors)
        topics = [
            (
                t.name,
                t.topic_id,
                [
                    (p.partition_index, error if error is not None else next(coordinator_errors))
                    for p, error in zip(t.partitions, decided, strict=True)
                ],
            )
            for t, _known, decided in slots
        ]
        # Packed by hand (byte-equal to the generated encoder, see its tests): the answer
        # to every commit, built without a message object per partition.
        return EncodedResponse(fast_offset_commit.encode_response(version, topics), 0)

    if not entries:
        return build([])
    # The answer waits for the commit's records to be as durable as the flush policy says.
    parked = ctx.park(build)
    result = broker.coordinator.commit_offsets(
        broker.now(),
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        request.group_instance_id if version >= 7 else None,
        entries,
        version,
    )
    broker.apply(result, parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, decode=fast_offset_commit.decode_request)
