"""CreatePartitions (key 37), versions 0-3.

Adds partitions to a topic (PartitionRecords, then new empty logs); the count must grow
(INVALID_PARTITIONS otherwise), and explicit assignments must name this node once per new
partition (INVALID_REPLICA_ASSIGNMENT). `validate_only` checks and changes nothing. v2 is
flexible. minicoord refuses to grow `__consumer_offsets`: a group's offsets partition is a
function of that count, and Kafka's coordinator would lose track of its groups too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kafka.protocol.admin import CreatePartitionsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import MAX_PARTITIONS_PER_REQUEST, replica_list_error

API_KEY = 37
TopicResult = CreatePartitionsResponse.CreatePartitionsTopicResult
DUPLICATE = "Duplicate topic name."
# Kafka's controller bounds one operation's records (KAFKA-14996), a partition each.
TOO_MANY = "Unable to perform excessively large batch operation."


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    names = [t.name for t in request.topics]
    node = broker.config.broker_id
    results = []
    # With ACLs (as Kafka): Alter on each topic, checked before whether it exists.
    denied = authorize.denied_topics(ctx, authorize.ALTER, names)
    # A name given twice is answered once, INVALID_REQUEST, and left alone (Kafka's
    # ControllerApis; librdkafka fails a whole call whose answer names a topic twice).
    named = Counter(names)
    handed = [t for t in request.topics if named[t.name] == 1 and t.name not in denied]
    # What the controller is handed fails as a whole when its partitions would be too many.
    too_many = sum(_added(broker, t) for t in handed) > MAX_PARTITIONS_PER_REQUEST
    for t in request.topics:
        if named[t.name] > 1:
            continue
        topic = broker.topics.get(t.name)
        error, message = ErrorCode.NONE, None
        if t.name in denied:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            message = "The topic authorization is failed."
        elif too_many:
            error, message = ErrorCode.POLICY_VIOLATION, TOO_MANY
        elif topic is None:
            # ReplicationControlManager throws UnknownTopicOrPartitionException() without a
            # message, and ApiError.fromThrowable keeps none.
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        elif topic.internal:
            error = ErrorCode.INVALID_REQUEST
            message = f"the partition count of {topic.name} is offsets.topic.num.partitions"
        elif t.count == topic.partitions:
            error, message = (
                ErrorCode.INVALID_PARTITIONS,
                f"Topic already has {t.count} partition(s).",
            )
        elif t.count < topic.partitions:
            error = ErrorCode.INVALID_PARTITIONS
            message = (
                f"The topic {t.name} currently has {topic.partitions} partition(s); "
                f"{t.count} would not be an increase."
            )
        elif t.assignments is not None and len(t.assignments) != t.count - topic.partitions:
            error = ErrorCode.INVALID_REPLICA_ASSIGNMENT
            message = (
                f"Attempted to add {t.count - topic.partitions} additional partition(s), but "
                f"only {len(t.assignments)} assignment(s) were specified."
            )
        elif t.assignments is not None and (refused := _replicas_error(t.assignments, node)):
            error, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, refused
        elif not request.validate_only:
            broker.add_partitions(topic, t.count)
        results.append(TopicResult(name=t.name, error_code=error, error_message=message))
    results += [
        TopicResult(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message=DUPLICATE)
        for name in dict.fromkeys(n for n in names if named[n] > 1)
    ]
    response = CreatePartitionsResponse(version=ctx.version, throttle_time_ms=0, results=results)
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)
    return parked


def _added(broker: Any, t: Any) -> int:
    topic = broker.topics.get(t.name)
    return 0 if topic is None else max(0, t.count - topic.partitions)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)


def _replicas_error(assignments: Any, node: int) -> str | None:
    """Why the new partitions' replica lists cannot be taken, each checked as Kafka's
    controller checks them against the topic's replication factor (1); None if they can."""
    for a in assignments:
        why = replica_list_error(a.broker_ids, node, 1)
        if why is not None:
            return why
    return None
