"""Metadata (key 3), versions 0-13.

This node is the only broker and leads every partition of every topic. v1 adds the
controller and internal flags (v0 asks for all topics with an empty list, v1+ with null);
v2 the cluster id; v4 lets the client forbid auto-creation; v7 leader epochs; v8 authorized
operations (computed when asked); v9 is flexible; v10 topic ids and
lookup by id; v12 nullable topic names; v13 a top-level error code.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from kafka.protocol.metadata import MetadataResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server import cluster_view
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    Topic,
    topic_name_error,
)

API_KEY = 3
TOPIC = authorize.TOPIC
DESCRIBE = authorize.DESCRIBE
_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_NO_OPERATIONS = (_DENIED, ErrorCode.UNKNOWN_TOPIC_ID)
_ZERO_UUID = uuid.UUID(int=0)
Partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition


def _topic(topic: Topic, node: int) -> Any:
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=cluster_view.partitions(Partition, node, 0, topic.partitions),
    )


def _error(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> Any:
    return MetadataResponse.MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=topic_id or _ZERO_UUID,
        is_internal=False,
        partitions=[],
    )


def _may_create(ctx: RequestContext, name: str) -> bool:
    return authorize.cluster_allowed(ctx, authorize.CREATE) or authorize.allowed(
        ctx, authorize.CREATE, TOPIC, name
    )


def _authorized_operations(ctx: RequestContext, request: Any, topics: list[Any]) -> None:
    """v8+: each answered topic's operations, when asked (kafka-python takes a set of bits).
    Kafka sets them on every topic the principal may describe, unknown and invalid names
    included; not on a topic refused (TOPIC_AUTHORIZATION_FAILED) or an unknown topic id."""
    if ctx.version < 8 or not request.include_topic_authorized_operations:
        return
    for t in topics:
        if t.error_code not in _NO_OPERATIONS:
            t.authorized_operations = authorize.operation_set(ctx, TOPIC, t.name)


def _cluster_operations(ctx: RequestContext, request: Any) -> set[int] | None:
    # v8-10 only.
    if not 8 <= ctx.version <= 10 or not request.include_cluster_authorized_operations:
        return None
    return cluster_view.cluster_operations(ctx)


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    registry = broker.topics
    requested = request.topics
    # Clients starting together ask the same question a thousand times: while no topic
    # changed, the same question on the same listener gets the same bytes.
    key = (
        ctx.version,
        ctx.channel.address,
        None if requested is None else tuple((t.name, t.topic_id) for t in requested),
        ctx.version < 4 or request.allow_auto_topic_creation,
    )
    # The authorized operations asked for are answered with or without ACLs.
    key += (
        ctx.version >= 8 and request.include_topic_authorized_operations,
        8 <= ctx.version <= 10 and request.include_cluster_authorized_operations,
    )
    store = broker.authorizer
    if store is not None:
        # With ACLs the answer also depends on who asks, from where and under which ACLs.
        key += (ctx.channel.principal, ctx.channel.client_host, store.generation)
    answers = registry.cached_answers()
    cached = answers.get(key)
    if cached is not None:
        return cached
    out = _answer(ctx, request)
    if isinstance(out, MetadataResponse):
        from minicoord.server.request_log import error_counts

        cached = answers[key] = EncodedResponse(
            bytes(out.encode(version=ctx.version)), ErrorCode.NONE, tuple(error_counts(out))
        )
        return cached
    return out


class _ById(NamedTuple):
    topic_id: uuid.UUID
    name: None = None


def _answer(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    config = broker.config
    registry = broker.topics
    node = config.broker_id
    version = ctx.version
    requested = request.topics
    topics = []
    created = False
    # With ACLs (as Kafka): topics without Describe are left out of "all topics" and are
    # TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs Create (cluster or topic).
    checked = broker.authorizer is not None
    if requested is None or (version == 0 and not requested):
        topics = [_topic(t, node) for t in cluster_view.describable_topics(ctx, registry.all())]
    else:
        allow_create = config.auto_create_topics_enable and (
            version < 4 or request.allow_auto_topic_creation
        )
        ids = dict.fromkeys(
            e.topic_id for e in requested if version >= 12 and e.topic_id not in (None, _ZERO_UUID)
        )
        if ids:
            # As Kafka's KafkaApis: one topic id in the request and it is answered by id
            # alone, each id once (the Java admin client's describeTopics by id sends ids
            # beside names left empty, its schema's default).
            requested = [_ById(topic_id) for topic_id in ids]
        for entry in requested:
            name = entry.name
            if name is None:
                found = registry.by_id(entry.topic_id)
                if found and checked and not authorize.allowed(ctx, DESCRIBE, TOPIC, found.name):
                    # Topic ids are not secret: the id comes back, the name does not.
                    topics.append(_error(None, entry.topic_id, _DENIED))
                    continue
                topics.append(
                    _topic(found, node)
                    if found
                    else _error(None, entry.topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
                )
                continue
            if checked and not authorize.allowed(ctx, DESCRIBE, TOPIC, name):
                topics.append(_error(name, None, _DENIED))
                continue
            found = registry.get(name)
            if found is None:
                if topic_name_error(name) is not None:
                    topics.append(_error(name, None, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if not allow_create:
                    topics.append(_error(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if registry.colliding(name) is not None:
                    # Kafka's controller refuses to create it; its broker answers
                    # LEADER_NOT_AVAILABLE until the client gives up, where this says why.
                    topics.append(_error(name, None, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if checked and not _may_create(ctx, name):
                    topics.append(_error(name, None, _DENIED))
                    continue
                if name == OFFSETS_TOPIC:
                    # Before its first use: Kafka creates it when named here, as any topic.
                    broker.create_offsets_topic()
                    found = registry.offsets
                elif name == TRANSACTION_STATE_TOPIC:
                    broker.create_transaction_state_topic()
                    found = registry.transaction_state
                else:
                    found = broker.create_topic(name, config.num_partitions)
                    created = True
            topics.append(_topic(found, node))
    # Without ACLs, every operation the resource supports (Kafka's authorizedOperations).
    _authorized_operations(ctx, request, topics)
    response = MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(
                node_id=b.node_id, host=b.host, port=b.port, rack=b.rack
            )
            for b in cluster_view.brokers(ctx)
        ],
        cluster_id=broker.cluster_id,
        controller_id=cluster_view.controller_id(ctx),
        topics=topics,
        error_code=ErrorCode.NONE,
        authorized_operations=_cluster_operations(ctx, request),
    )
    if not created:
        return response
    # An auto-created topic is answered once its metadata records are durable.
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
