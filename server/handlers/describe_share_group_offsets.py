"""DescribeShareGroupOffsets (key 90), versions 0-1: where each partition of a share group
starts (its share-partition start offset), as Kafka's GroupCoordinatorService describes it.

Topics null: every partition the group has delivered from; a topic that does not exist is
listed with start offset -1 and a zero id, a partition the group never read from with -1
(absence of data, as OffsetFetch answers it). v1 adds the lag: the log end offset less the
start offset less the records past it already done, -1 where there is no start. Describe on
the group is needed (GROUP_AUTHORIZATION_FAILED), and topics one may not Describe are left
out, as Kafka leaves them out.
"""

from __future__ import annotations

import uuid
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import DescribeShareGroupOffsetsResponse
from minicoord.server.features import SHARE_VERSION
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import LEADER_EPOCH

API_KEY = 90
Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = Group.DescribeShareGroupOffsetsResponseTopic
Partition = Topic.DescribeShareGroupOffsetsResponsePartition
NO_TOPIC_ID = uuid.UUID(int=0)
UNINITIALIZED = -1


def _partition(index: int, start: int = UNINITIALIZED, lag: int = UNINITIALIZED) -> Any:
    return Partition(
        partition_index=index,
        start_offset=start,
        leader_epoch=LEADER_EPOCH if start != UNINITIALIZED else 0,
        lag=lag,
        error_code=ErrorCode.NONE,
        error_message=None,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    enabled = broker.features.level(SHARE_VERSION) >= 1
    out = []
    for g in request.groups:
        error = None
        if not enabled:
            error = ErrorCode.UNSUPPORTED_VERSION
        elif authorize.group_denied(ctx, g.group_id, authorize.DESCRIBE):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            error = broker.coordinator.unavailable(g.group_id)
        if error is not None:
            out.append(Group(group_id=g.group_id, topics=[], error_code=error, error_message=None))
            continue
        out.append(
            Group(
                group_id=g.group_id,
                topics=_topics(ctx, g.group_id, g.topics),
                error_code=ErrorCode.NONE,
                error_message=None,
            )
        )
    return DescribeShareGroupOffsetsResponse(version=ctx.version, throttle_time_ms=0, groups=out)


def _topics(ctx: RequestContext, group: str, asked: Any) -> list[Any]:
    broker = ctx.broker
    shares = broker.shares if "shares" in broker.__dict__ else None
    registry = broker.topics
    wanted: list[tuple[str, Any, list[int]]] = []
    if asked is None:
        held = shares.topics_of(group) if shares is not None else {}
        for topic_id, indexes in held.items():
            topic = registry.by_id(topic_id)
            if topic is not None:
                wanted.append((topic.name, topic, indexes))
    else:
        wanted = [(t.topic_name, registry.get(t.topic_name), list(t.partitions)) for t in asked]
    denied = authorize.denied_topics(ctx, authorize.DESCRIBE, [name for name, _, _ in wanted])
    topics = []
    for name, topic, indexes in wanted:
        if name in denied:
            continue
        if topic is None:
            topics.append(
                Topic(
                    topic_name=name,
                    topic_id=NO_TOPIC_ID,
                    partitions=[_partition(i) for i in indexes],
                )
            )
            continue
        parts = []
        for index in indexes:
            sp = shares.partitions.get((group, topic.topic_id, index)) if shares else None
            state = broker.data.partition(topic, index) if sp is not None else None
            if sp is None or state is None:
                parts.append(_partition(index))
                continue
            end = state.log.high_watermark
            parts.append(_partition(index, sp.start, end - sp.start - sp.done_in_flight()))
        topics.append(Topic(topic_name=name, topic_id=topic.topic_id, partitions=parts))
    return topics


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
