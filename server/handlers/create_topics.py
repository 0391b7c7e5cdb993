"""CreateTopics (key 19), versions 2-7 (Kafka 4 dropped 0-1).

v1 added validate-only; v5 is flexible and returns the created topic's partition count,
replication factor and configs; v7 its topic id. With one broker, a replication factor
above 1 is INVALID_REPLICATION_FACTOR, as Kafka would answer. Topic configs are Kafka's
(INVALID_CONFIG for an unknown name or a bad value). The topic's records are in the cluster
metadata log before the answer, so it survives a restart with its id and configs.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kafka.protocol.admin import CreateTopicsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topic_configs import TopicConfig
from minicoord.server.topics import (
    MAX_PARTITIONS_PER_REQUEST,
    METADATA_TOPIC,
    replica_list_error,
)

API_KEY = 19
TOO_MANY = "Excessively large number of partitions per request."
_ZERO_UUID = uuid.UUID(int=0)
Config = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
DUPLICATE = "Duplicate topic name."
# ControllerApis.createTopics: the one internal topic no request may create.
PROHIBITED = f"Creation of internal topic {METADATA_TOPIC} is prohibited."


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    registry = broker.topics
    default_partitions = broker.config.num_partitions
    names = [t.name for t in request.topics]
    results = []
    # With ACLs (as Kafka): Create on the cluster or on the topic; without DescribeConfigs
    # on it, the created topic's configs are not returned (topic_config_error_code).
    checked = broker.authorizer is not None
    cluster_create = checked and authorize.cluster_allowed(ctx, authorize.CREATE)
    # A name given twice is answered once, INVALID_REQUEST, and neither is created (Kafka's
    # ControllerApis): clients match results by name, and librdkafka fails a whole call whose
    # answer names a topic twice.
    named = Counter(names)
    permitted = {
        t.name
        for t in request.topics
        if not checked
        or cluster_create
        or authorize.allowed(ctx, authorize.CREATE, authorize.TOPIC, t.name)
    }
    # Counted over the topics the controller would be handed (named once, permitted), as
    # Kafka's validateTotalNumberOfPartitions; too many fails every one of them.
    too_many = (
        sum(
            max(0, _partitions(t, default_partitions))
            for t in request.topics
            if named[t.name] == 1 and t.name in permitted
        )
        > MAX_PARTITIONS_PER_REQUEST
    )
    for topic in request.topics:
        if named[topic.name] > 1:
            continue
        partitions = _partitions(topic, default_partitions)
        configs = {c.name: c.value for c in topic.configs or ()}
        error, message = ErrorCode.NONE, None
        if topic.name == METADATA_TOPIC:
            error, message = ErrorCode.INVALID_REQUEST, PROHIBITED
        elif topic.name not in permitted:
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        elif too_many:
            error, message = ErrorCode.POLICY_VIOLATION, TOO_MANY
        else:
            # Kafka's controller: the name, whether it exists, the configs, and only then the
            # topic's own settings (a "create if missing" with replication factor 3 learns
            # that the topic exists, not that the factor cannot be met).
            error, message = registry.check_new(topic.name, partitions, configs)
            if error in (ErrorCode.NONE, ErrorCode.INVALID_PARTITIONS):
                refused = _creation_error(topic, broker.config.broker_id)
                if refused is not None:
                    error, message = refused
        topic_id = _ZERO_UUID
        created = None
        if error is ErrorCode.NONE and not request.validate_only:
            created = broker.create_topic(topic.name, partitions, configs)  # type: ignore[arg-type]
            topic_id = created.topic_id
        ok = error is ErrorCode.NONE
        described = []
        config_error = ErrorCode.NONE
        if (
            ok
            and checked
            and not authorize.allowed(ctx, authorize.DESCRIBE_CONFIGS, authorize.TOPIC, topic.name)
        ):
            config_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        # As Kafka's ReplicationControlManager.createTopic: a created topic's partition count,
        # replication factor and configs only for one who may describe its configs.
        shown = ok and config_error is ErrorCode.NONE
        if shown:
            config = (
                registry.config_of(created)
                if created is not None
                else TopicConfig(configs, registry.defaults)  # type: ignore[arg-type]
            )
            described = [
                Config(
                    name=e.name,
                    value=e.value,
                    read_only=False,
                    config_source=e.source,
                    is_sensitive=False,
                )
                # In name order, as Kafka's controller sorts them (createTopic).
                for e in sorted(config.describe(), key=lambda e: e.name)
            ]
        results.append(
            CreateTopicsResponse.CreatableTopicResult(
                name=topic.name,
                topic_id=topic_id,
                error_code=error,
                error_message=message,
                num_partitions=partitions if shown else -1,
                replication_factor=1 if shown else -1,
                configs=described if shown else None,
                topic_config_error_code=config_error,
            )
        )
    for name in dict.fromkeys(n for n in names if named[n] > 1):
        results.append(
            CreateTopicsResponse.CreatableTopicResult(
                name=name,
                topic_id=_ZERO_UUID,
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=DUPLICATE,
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
                topic_config_error_code=ErrorCode.NONE,
            )
        )
    response = CreateTopicsResponse(version=ctx.version, throttle_time_ms=0, topics=results)
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the new topics are durable
    return parked


def _partitions(topic: Any, default: int) -> int:
    """The partitions a topic entry asks for: its assignments', else its count (-1: the
    broker's num.partitions)."""
    if topic.assignments:
        return len(topic.assignments)
    return default if topic.num_partitions == -1 else topic.num_partitions


def _creation_error(topic: Any, node: int) -> tuple[ErrorCode, str] | None:
    """What Kafka's ReplicationControlManager.createTopic refuses of a topic whose name,
    existence and configs passed: its manual assignment, or its replication factor and
    partition count (in that order, in its words), with this one broker registered."""
    if topic.assignments:
        return _assignment_error(topic, node)
    factor, count = topic.replication_factor, topic.num_partitions
    if factor < -1 or factor == 0:
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if count < -1 or count == 0:
        return (
            ErrorCode.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        )
    if factor > 1:
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {factor} time(s): The target replication "
            f"factor of {factor} cannot be reached because only 1 broker(s) are registered.",
        )
    return None


def _assignment_error(topic: Any, node: int) -> tuple[ErrorCode, str] | None:
    """Why a manual partition assignment cannot be taken, as Kafka's controller checks it
    (ReplicationControlManager.createTopic, validateManualPartitionAssignment); None if
    there is none or it can. This one broker is the only one registered."""
    if not topic.assignments:
        return None
    if topic.replication_factor != -1:
        return (
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        )
    if topic.num_partitions != -1:
        return (
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    seen: set[int] = set()
    replicas = None
    for a in topic.assignments:
        bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
        if a.partition_index in seen:
            return (
                bad,
                f"Found multiple manual partition assignments for partition {a.partition_index}",
            )
        seen.add(a.partition_index)
        why = replica_list_error(a.broker_ids, node, replicas)
        if why is not None:
            return bad, why
        replicas = len(a.broker_ids)
    if seen != set(range(len(seen))):
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return None


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
