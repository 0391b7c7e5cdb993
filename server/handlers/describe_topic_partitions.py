"""DescribeTopicPartitions (key 75), version 0: topics' partitions a page at a time (KIP-966).

Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse
(trunk of Oct 2025, 4.2: KAFKA-15873 filters by ACL before sorting). The Java admin client
(3.8+) describes topics by name with it. Named topics, or every topic when none is named,
from the cursor's topic on (names at or after it), sorted by name; the cursor's topic starts
at its partition, every other at 0. At most `response_partition_limit` partitions
(1..max.request.partition.size.limit) are answered: a topic cut short gives the next cursor
at its first partition left out; a limit used up exactly gives the next topic at 0, whether
or not that topic exists. A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION
(INVALID_TOPIC_EXCEPTION for an illegal name) with no partitions and takes none of the limit;
when listing every topic none is.

Each partition as Metadata answers it (cluster_view): this node leads it at one epoch, is its
only replica and in-sync replica, and no eligible leader replicas or last known ELR (empty,
as Kafka's for a partition whose ISR is whole). Each topic answered carries its authorized
operations, unknown names included (no flag asks for them). A topic the principal may not
describe is left out of "every topic", and a named one is TOPIC_AUTHORIZATION_FAILED with no
id, after the others, on every page. A cursor naming a topic not in the named list, or a
negative partition, is INVALID_REQUEST on every named topic (Kafka throws and answers the
request's error response; with no topics named that is an empty answer).
"""

from __future__ import annotations

import uuid
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server import cluster_view
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import topic_name_error

API_KEY = 75
_ZERO_UUID = uuid.UUID(int=0)
# A partition of a single-node cluster: never an ELR (KIP-966) beside its one in-sync
# replica. Shared by every partition built, never changed.
_NO_ELR: list[int] = []


def handle(ctx: RequestContext, request: Any) -> Any:
    response = ctx.spec.response
    registry = ctx.broker.topics
    cursor = request.cursor
    # Kafka compares names with String.compareTo; with no cursor every name is at or after "".
    after = cursor.topic_name if cursor is not None else ""
    every = not request.topics
    if every:
        names = {t.name for t in registry.all() if t.name >= after}
    else:
        names = {t.name for t in request.topics if t.name >= after}
        if cursor is not None and cursor.topic_name not in names:
            return _invalid(ctx, request)
    if cursor is not None and cursor.partition_index < 0:
        return _invalid(ctx, request)
    denied = authorize.denied_topics(ctx, authorize.DESCRIBE, names)
    limit = max(
        min(ctx.broker.config.max_request_partition_size_limit, request.response_partition_limit), 1
    )
    topics, next_cursor = _page(ctx, sorted(names - denied), after, cursor, limit, every)
    for t in topics:
        t.topic_authorized_operations = authorize.authorized_operations(
            ctx, authorize.TOPIC, t.name
        )
    if not every:
        # Kafka's order of these is a hash set's; sorted here. No id: it would disclose one.
        topics += [
            _topic(ctx, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, internal=False)
            for name in sorted(denied)
        ]
    return response(version=ctx.version, throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _page(
    ctx: RequestContext, names: list[str], after: str, cursor: Any, limit: int, every: bool
) -> tuple[list[Any], Any]:
    """The topics answered within `limit` partitions, and the next cursor (None when done)."""
    response = ctx.spec.response
    Topic = response.DescribeTopicPartitionsResponseTopic
    Partition = Topic.DescribeTopicPartitionsResponsePartition
    registry = ctx.broker.topics
    node = ctx.broker.config.broker_id
    remaining = limit
    out: list[Any] = []
    for name in names:
        if remaining == 0:
            return out, response.Cursor(topic_name=name, partition_index=0)
        topic = registry.get(name)
        if topic is None:
            if not every:
                error = (
                    ErrorCode.INVALID_TOPIC_EXCEPTION
                    if topic_name_error(name) is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                out.append(_topic(ctx, name, error))
            continue
        start = cursor.partition_index if cursor is not None and name == after else 0
        stop = min(topic.partitions, start + remaining)
        partitions = cluster_view.partitions(
            Partition, node, start, stop, eligible_leader_replicas=_NO_ELR, last_known_elr=_NO_ELR
        )
        out.append(
            Topic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=topic.topic_id,
                is_internal=name in cluster_view.INTERNAL_TOPICS,
                partitions=partitions,
            )
        )
        if stop < topic.partitions:
            return out, response.Cursor(topic_name=name, partition_index=stop)
        remaining -= len(partitions)
    return out, None


def _topic(ctx: RequestContext, name: str, error: ErrorCode, internal: bool | None = None) -> Any:
    """A topic answered with an error: no id, no partitions."""
    return ctx.spec.response.DescribeTopicPartitionsResponseTopic(
        error_code=error,
        name=name,
        topic_id=_ZERO_UUID,
        is_internal=name in cluster_view.INTERNAL_TOPICS if internal is None else internal,
        partitions=[],
    )


def _invalid(ctx: RequestContext, request: Any) -> Any:
    # DescribeTopicPartitionsRequest.getErrorResponse: each named topic, in the request's
    # order and as often as named, with the error and nothing else.
    return ctx.spec.response(
        version=ctx.version,
        throttle_time_ms=0,
        topics=[_topic(ctx, t.name, ErrorCode.INVALID_REQUEST, False) for t in request.topics],
        next_cursor=None,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
