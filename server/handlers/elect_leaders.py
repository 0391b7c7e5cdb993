"""ElectLeaders (key 43), versions 0-2: elect preferred (or, v1+, unclean) leaders.

As Kafka 4's controller answers it (ControllerApis.handleElectLeaders, QuorumController
.electLeaders, ReplicationControlManager.electLeaders/electLeader), on a cluster of one node:
this node is every partition's only replica, its preferred replica and its leader, so no
election is ever needed. Each partition named answers ELECTION_NOT_NEEDED ("Leader election
not needed for topic partition.", both for preferred and for unclean elections, which Kafka
skips when the partition has a leader); an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION with Kafka's words. Null partitions mean every partition of every
topic, and then, as Kafka, the partitions that needed no election are left out: each topic
is listed with no partitions (sorted by name here; Kafka's order is its hash map's). An
empty list is answered at once with nothing. An election type other than 0 or 1 is
INVALID_REQUEST "Unknown election type N" for the whole request (v1+; v0 has no type and is
preferred). Needs Alter on the cluster: else CLUSTER_AUTHORIZATION_FAILED at the top (v1+)
and for every partition named, none when all were asked for (Kafka's getErrorResponse).
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1
# Errors.ELECTION_NOT_NEEDED's message: Kafka's ApiError(error) carries it.
NOT_NEEDED = "Leader election not needed for topic partition."

Outcome = tuple[int, str | None]


def handle(ctx: RequestContext, request: Any) -> Any:
    asked = request.topic_partitions
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        denied = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authorize.not_authorized(ctx))
        return _refuse(ctx, asked, denied)
    if asked is not None and not asked:
        return _answer(ctx, ErrorCode.NONE, [])
    # v0 has no type on the wire: kafka-python leaves the field unset, Kafka reads it as 0.
    election = request.election_type if ctx.version >= 1 else PREFERRED
    if election not in (PREFERRED, UNCLEAN):
        return _refuse(ctx, asked, (ErrorCode.INVALID_REQUEST, f"Unknown election type {election}"))
    registry = ctx.broker.topics
    if asked is None:
        # Every partition exists and is led by its preferred replica: none is listed.
        return _answer(ctx, ErrorCode.NONE, [(t.name, []) for t in _sorted(registry.all())])
    results = []
    for entry in asked:
        topic = registry.get(entry.topic)
        outcomes: list[tuple[int, Outcome]] = []
        for partition in entry.partitions:
            if topic is None:
                outcome: Outcome = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such topic as {entry.topic}",
                )
            elif not 0 <= partition < topic.partitions:
                outcome = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such partition as {entry.topic}-{partition}",
                )
            else:
                outcome = (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)
            outcomes.append((partition, outcome))
        results.append((entry.topic, outcomes))
    return _answer(ctx, ErrorCode.NONE, results)


def _sorted(topics: Any) -> list[Any]:
    return sorted(topics, key=lambda t: t.name)


def _refuse(ctx: RequestContext, asked: Any, outcome: Outcome) -> Any:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error at the top and for every
    partition named (nothing when all partitions were asked for)."""
    results = [(t.topic, [(p, outcome) for p in t.partitions]) for t in asked or ()]
    return _answer(ctx, outcome[0], results)


def _answer(
    ctx: RequestContext, error: int, results: list[tuple[str, list[tuple[int, Outcome]]]]
) -> Any:
    response = ctx.spec.response
    result_cls = response.ReplicaElectionResult
    partition_cls = result_cls.PartitionResult
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        # v0 has no top-level error: a refusal shows in the partitions only.
        error_code=error,
        replica_election_results=[
            result_cls(
                topic=name,
                partition_result=[
                    partition_cls(partition_id=p, error_code=code, error_message=message)
                    for p, (code, message) in partitions
                ],
            )
            for name, partitions in results
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
