"""AlterPartitionReassignments (key 45), versions 0-1: move partitions to other replicas.

As Kafka 4's controller answers it (ControllerApis.handleAlterPartitionReassignments,
ReplicationControlManager.alterPartitionReassignments) on a cluster of one node, which is
every partition's only replica and the only broker registered. Per partition, in Kafka's
order of checks: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION ("Unable to find
a topic named T.", "Unable to find partition T:N."); cancelling (null replicas) is
NO_REASSIGNMENT_IN_PROGRESS, none ever being in progress; a target is checked as Kafka's
validateManualPartitionAssignment checks it (empty; in ascending order, a broker not
registered, then one named twice: INVALID_REPLICA_ASSIGNMENT with its words); the one target
that passes, [this node], is the partition's assignment already, which Kafka accepts with no
change: NONE. A replication factor change (v1's allow_replication_factor_change false) can
never be asked for, every valid target having one replica. v1 echoes that flag. An empty
request is answered as Kafka's controller answers it before looking: no error, an empty
message ("", not null) and the flag's default (true). Needs Alter on the cluster: else
CLUSTER_AUTHORIZATION_FAILED with Kafka's words at the top and for every partition named.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import Topic

API_KEY = 45
INVALID = ErrorCode.INVALID_REPLICA_ASSIGNMENT
Outcome = tuple[int, str | None]
ACCEPTED: Outcome = (ErrorCode.NONE, None)
# Kafka throws NoReassignmentInProgressException with the error's own message, which its
# ApiError drops: the answer carries no message.
NOT_IN_PROGRESS: Outcome = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)


def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        denied = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authorize.not_authorized(ctx))
        outcomes = [
            (t.name, [(p.partition_index, denied) for p in t.partitions]) for t in request.topics
        ]
        # getErrorResponse leaves the flag at its default.
        return _answer(ctx, denied, outcomes, True)
    if not request.topics:
        # QuorumController answers a new, empty response: its message and flag are defaults.
        return _answer(ctx, (ErrorCode.NONE, ""), [], True)
    registry = ctx.broker.topics
    node = ctx.broker.config.broker_id
    outcomes = []
    for asked in request.topics:
        topic = registry.get(asked.name)
        outcomes.append(
            (
                asked.name,
                [
                    (p.partition_index, _outcome(asked.name, topic, p, node))
                    for p in asked.partitions
                ],
            )
        )
    return _answer(ctx, ACCEPTED, outcomes, request.allow_replication_factor_change)


def _outcome(name: str, topic: Topic | None, partition: Any, node: int) -> Outcome:
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
    index = partition.partition_index
    if not 0 <= index < topic.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
    if partition.replicas is None:
        return NOT_IN_PROGRESS
    return _target_error(partition.replicas, node) or ACCEPTED


def _target_error(replicas: list[int], node: int) -> Outcome | None:
    """Kafka's validateManualPartitionAssignment, where only `node` is registered."""
    if not replicas:
        return INVALID, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node:
            return INVALID, (
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered."
            )
        if broker_id == previous:
            return INVALID, (
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    return None


def _answer(
    ctx: RequestContext,
    top: Outcome,
    outcomes: list[tuple[str, list[tuple[int, Outcome]]]],
    allow_rf_change: bool,
) -> Any:
    response = ctx.spec.response
    topic_cls = response.ReassignableTopicResponse
    partition_cls = topic_cls.ReassignablePartitionResponse
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=top[0],
        error_message=top[1],
        responses=[
            topic_cls(
                name=name,
                partitions=[
                    partition_cls(partition_index=i, error_code=code, error_message=message)
                    for i, (code, message) in partitions
                ],
            )
            for name, partitions in outcomes
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
