"""OffsetFetch (key 9), versions 1-10 (Kafka 4 dropped 0).

v2 fetches all of a group's offsets with null topics and adds a top-level error; v5 leader
epochs; v6 is flexible; v7 require_stable (a partition an open transaction has committed an
offset of is UNSTABLE_OFFSET_COMMIT); v8 batches groups (KIP-709); v9 member id and epoch: a
member of a KIP-848 group must name its current epoch (UNKNOWN_MEMBER_ID /
STALE_MEMBER_EPOCH; classic groups ignore them); v10 names topics by id. A partition with no
commit is offset -1.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kafka.protocol.consumer import OffsetFetchResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.offsets import CommittedOffset, TopicPartition
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 9
TOPIC = ResourceType.TOPIC
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_ZERO_UUID = uuid.UUID(int=0)
V7Topic = OffsetFetchResponse.OffsetFetchResponseTopic
V7Partition = V7Topic.OffsetFetchResponsePartition
Group = OffsetFetchResponse.OffsetFetchResponseGroup
V8Topic = Group.OffsetFetchResponseTopics
V8Partition = V8Topic.OffsetFetchResponsePartitions


def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: Iterable[Any] | None,
    by_id: bool,
    member_id: str | None = None,
    member_epoch: int = -1,
    require_stable: bool = False,
) -> tuple[ErrorCode, dict[str, list[tuple[int, CommittedOffset | None, ErrorCode]]]]:
    """Offsets grouped by topic name; unknown topic ids are reported per partition.

    With ACLs (as Kafka): Describe on the group, else GROUP_AUTHORIZATION_FAILED; topics
    without Describe are TOPIC_AUTHORIZATION_FAILED when named, and left out of "all".
    """
    registry = ctx.broker.topics
    checked = ctx.broker.authorizer is not None
    if checked and authorize.group_denied(ctx, group_id, authorize.DESCRIBE):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    wanted: list[TopicPartition] | None = None
    unknown: dict[str, list[tuple[int, CommittedOffset | None, ErrorCode]]] = {}
    if topics is not None:
        wanted = []
        for t in topics:
            if by_id:
                known = registry.by_id(t.topic_id)
                if known is None:
                    unknown[str(t.topic_id)] = [
                        (i, None, ErrorCode.UNKNOWN_TOPIC_ID) for i in t.partition_indexes
                    ]
                    continue
                name = known.name
            else:
                name = t.name
            if checked and not authorize.allowed(ctx, authorize.DESCRIBE, TOPIC, name):
                unknown[name] = [(i, None, _TOPIC_DENIED) for i in t.partition_indexes]
                continue
            wanted.extend((name, i) for i in t.partition_indexes)
    error, found = ctx.broker.coordinator.fetch_offsets(group_id, wanted, member_id, member_epoch)
    by_topic: dict[str, list[tuple[int, CommittedOffset | None, ErrorCode]]] = {}
    if error is not ErrorCode.NONE:
        if ctx.version >= 2:
            # The group's error alone, no topics, as Kafka answers it (v8+: the group entry
            # with its error; v2-7: the top-level error).
            return error, {}
        # v1 has no group-level error field: each partition asked for carries it.
        found = [(tp, None) for tp in wanted or ()]
    # Offsets of open transactions, when the request asks for stable ones only.
    pending = ctx.broker.coordinator.txn_offsets if require_stable else None
    if pending is not None and not pending.by_producer:
        pending = None
    for (topic, index), committed in found:
        if pending is not None and pending.unstable(group_id, (topic, index)):
            # An open transaction holds an offset of it (Kafka: offset -1 and this error).
            by_topic.setdefault(topic, []).append((index, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
            continue
        by_topic.setdefault(topic, []).append((index, committed, error))
    if checked and topics is None:
        hidden = authorize.denied_topics(ctx, authorize.DESCRIBE, by_topic)
        by_topic = {name: parts for name, parts in by_topic.items() if name not in hidden}
    by_topic.update(unknown)
    return error, by_topic


def _topic_id(ctx: RequestContext, name: str) -> uuid.UUID:
    known = ctx.broker.topics.get(name)
    if known is not None:
        return known.topic_id
    try:
        return uuid.UUID(name)  # an unknown id we reported under its own text
    except ValueError:
        return _ZERO_UUID


def _partition(cls: Any, index: int, c: CommittedOffset | None, error: ErrorCode) -> Any:
    return cls(
        partition_index=index,
        committed_offset=c.offset if c else -1,
        committed_leader_epoch=c.leader_epoch if c else -1,
        metadata=c.metadata if c else "",
        error_code=error,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    if version < 8:
        stable = version >= 7 and request.require_stable
        error, by_topic = _fetch(
            ctx, request.group_id, request.topics, False, require_stable=stable
        )
        topics = [
            V7Topic(name=name, partitions=[_partition(V7Partition, *p) for p in parts])
            for name, parts in by_topic.items()
        ]
        return OffsetFetchResponse(
            version=version, throttle_time_ms=0, topics=topics, error_code=error
        )
    by_id = version >= 10
    groups = []
    for g in request.groups:
        member_id, epoch = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
        error, by_topic = _fetch(
            ctx, g.group_id, g.topics, by_id, member_id, epoch, request.require_stable
        )
        topics = [
            V8Topic(
                name=name,
                topic_id=_topic_id(ctx, name) if by_id else None,
                partitions=[_partition(V8Partition, *p) for p in parts],
            )
            for name, parts in by_topic.items()
        ]
        groups.append(Group(group_id=g.group_id, topics=topics, error_code=error))
    return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
