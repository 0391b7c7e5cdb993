"""ListPartitionReassignments (key 46), version 0: the reassignments in progress.

As Kafka 4's controller answers it (ControllerApis.handleListPartitionReassignments,
ReplicationControlManager.listPartitionReassignments): this node is every partition's only
replica and nothing ever moves, so no reassignment is ever in progress and the list is
empty, whether every topic (null) or some were asked for; as in Kafka, a topic or partition
that does not exist is left out silently. Needs Describe on the cluster: else
CLUSTER_AUTHORIZATION_FAILED with Kafka's words, and, as its getErrorResponse, each partition
named listed back with empty replica lists.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 46


def handle(ctx: RequestContext, request: Any) -> Any:
    response = ctx.spec.response
    if authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        return response(
            version=ctx.version, throttle_time_ms=0, error_code=0, error_message=None, topics=[]
        )
    topic_cls = response.OngoingTopicReassignment
    partition_cls = topic_cls.OngoingPartitionReassignment
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        error_message=authorize.not_authorized(ctx),
        topics=[
            topic_cls(
                name=t.name,
                partitions=[
                    partition_cls(
                        partition_index=p, replicas=[], adding_replicas=[], removing_replicas=[]
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in request.topics or ()
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
