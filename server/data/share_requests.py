"""What ShareFetch and ShareAcknowledge share: checking a request's member, finding the
partitions it names, and applying its acknowledgements (Kafka's KafkaApis and
SharePartitionManager, in their order and words)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.share.groups import MAX_MEMBER_ID
from minicoord.server.data.share_partitions import (
    REJECT,
    RENEW,
    AckBatch,
    AckError,
    check_ack_batches,
)

# (topic id, partition)
Tp = tuple[Any, int]
# An answer for one partition: (error code, message or None).
Outcome = tuple[ErrorCode, str | None]
OK: Outcome = (ErrorCode.NONE, None)


GROUP_DENIED = "Group authorization failed."


def kept_first(ctx: Any, response: Any) -> Any:
    """`response`, sent once the share state it changed is kept (data/share_state.py): at
    once when nothing was to keep."""
    from minicoord.server.coordinator.results import Result

    broker = ctx.broker
    if not broker.persist_shares():
        return response
    held = ctx.hold(response)
    broker.apply(Result(None, [], []), held)
    return held


def refusal(response_class: Any, ctx: Any, error: ErrorCode, message: str | None = None) -> Any:
    """A ShareFetch or ShareAcknowledge refused as a whole: the top-level error, nothing else
    (the two responses share these fields)."""
    return response_class(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        acquisition_lock_timeout_ms=0,
        responses=[],
        node_endpoints=[],
    )


def refused(ctx: Any, request: Any) -> Outcome | None:
    """Why a ShareFetch or ShareAcknowledge is refused as a whole, before its session is
    looked at, in KafkaApis' order: share groups off, a bad member id, the group's Read."""
    from minicoord.server.features import SHARE_VERSION
    from minicoord.server.security import authorize

    if ctx.broker.features.level(SHARE_VERSION) < 1:
        return ErrorCode.UNSUPPORTED_VERSION, None
    group, member = request.group_id, request.member_id
    if not group:
        return ErrorCode.INVALID_REQUEST, "Group id must be set."
    if not member or not member.strip() or len(member) > MAX_MEMBER_ID:
        return ErrorCode.INVALID_REQUEST, "Invalid member id in the request."
    if authorize.group_denied(ctx, group):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, GROUP_DENIED
    return None


def offsets_admin_refused(ctx: Any, group: str, op: Any, create: bool) -> Outcome | None:
    """Why AlterShareGroupOffsets or DeleteShareGroupOffsets may not change the group's share
    state: share groups off, the group's ACL (`op`), an empty id, a group that is no share
    group or has members (made, empty, when `create` and there is none)."""
    from minicoord.server.features import SHARE_VERSION
    from minicoord.server.security import authorize

    broker = ctx.broker
    if broker.features.level(SHARE_VERSION) < 1:
        return ErrorCode.UNSUPPORTED_VERSION, None
    if authorize.group_denied(ctx, group, op):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if not group:
        return ErrorCode.INVALID_GROUP_ID, None
    error, message = broker.coordinator.shares.empty_group(group, create)
    return (error, message) if error else None


def acknowledgements(topics: Iterable[Any]) -> dict[Tp, list[AckBatch]]:
    """Each partition's acknowledgement batches, merged over repeated entries (librdkafka
    names a partition once to add it and again with its acknowledgements)."""
    out: dict[Tp, list[AckBatch]] = {}
    for t in topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                batches = out.setdefault((t.topic_id, p.partition_index), [])
                batches += [
                    (b.first_offset, b.last_offset, list(b.acknowledge_types))
                    for b in p.acknowledgement_batches
                ]
    return out


def locate(broker: Any, ctx: Any, topic_id: Any, index: int) -> tuple[Any, Any, Outcome]:
    """(topic, partition log, OK) for a partition a share request names, or its error."""
    from minicoord.server.security import authorize

    topic = broker.topics.by_id(topic_id)
    if topic is None:
        return None, None, (ErrorCode.UNKNOWN_TOPIC_ID, None)
    if not authorize.allowed(ctx, authorize.READ, authorize.TOPIC, topic.name):
        return None, None, (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    if not 0 <= index < topic.partitions:
        return None, None, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
    state = broker.data.partition(topic, index)
    if state is None:
        return None, None, (broker.data.error_for(topic, index), None)
    return topic, state.log, OK


def apply_acknowledgements(
    broker: Any,
    ctx: Any,
    group: str,
    member: str,
    acks: dict[Tp, list[AckBatch]],
    renew: bool,
    now: int,
) -> dict[Tp, Outcome]:
    """Apply each partition's acknowledgements (all of a partition's or none); its outcome."""
    shares = broker.shares
    lock_ms = shares.lock_ms_of(group)
    out: dict[Tp, Outcome] = {}
    for (topic_id, index), batches in acks.items():
        problem = check_ack_batches(batches, RENEW if renew else REJECT)
        if problem is not None:
            out[topic_id, index] = (ErrorCode.INVALID_REQUEST, problem)
            continue
        topic, _, outcome = locate(broker, ctx, topic_id, index)
        if topic is None:
            out[topic_id, index] = outcome
            continue
        sp = shares.partitions.get((group, topic_id, index))
        if sp is None:
            # Nothing of this partition was ever delivered to the group.
            out[topic_id, index] = (ErrorCode.INVALID_RECORD_STATE, "Batch record not found")
            continue
        try:
            sp.acknowledge(member, batches, lock_ms, now)
        except AckError as exc:
            out[topic_id, index] = (exc.error, exc.message)
        else:
            out[topic_id, index] = OK
    return out
