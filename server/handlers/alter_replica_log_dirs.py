"""AlterReplicaLogDirs (key 34), versions 1-2 (Kafka 4 dropped 0): move replicas between the
broker's log directories, as Kafka's ReplicaManager.alterReplicaLogDirs answers on a node with
one directory, where every replica already lives.

A partition asked into that directory (the path DescribeLogDirs names, or `(in memory)`) is
NONE, with nothing to move; into any other path LOG_DIR_NOT_FOUND; a partition this node does
not hold REPLICA_NOT_AVAILABLE (Kafka keeps that code for this API where it means "not a
replica here"); a topic name too long for Kafka's future-replica directory name
INVALID_TOPIC_EXCEPTION. Results are grouped by topic. Needs Alter on the cluster
(CLUSTER_AUTHORIZATION_FAILED for every partition otherwise). v2 is flexible.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.handlers.describe_log_dirs import log_dir_path
from minicoord.server.security import authorize

API_KEY = 34
# UnifiedLog.logFutureDirName: "<topic>-<partition>.<32 hex digits>-future", which must fit
# in a file name.
_FUTURE_SUFFIX = 1 + 32 + len("-future")
_NAME_MAX = 255


def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = authorize.cluster_allowed(ctx, authorize.ALTER)
    broker = ctx.broker
    own = log_dir_path(broker)
    data_dir = broker.logs.data_dir
    paths = {own} if data_dir is None else {own, str(data_dir.absolute())}
    # A partition named twice counts once, with the last directory given (Kafka's map).
    asked: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for index in t.partitions:
                asked[(t.name, index)] = d.path
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (name, index), path in asked.items():
        if not allowed:
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif len(f"{name}-{index}") + _FUTURE_SUFFIX > _NAME_MAX:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif path not in paths:
            error = ErrorCode.LOG_DIR_NOT_FOUND
        elif (topic := broker.topics.get(name)) is None or not 0 <= index < topic.partitions:
            error = ErrorCode.REPLICA_NOT_AVAILABLE
        else:
            error = ErrorCode.NONE
        by_topic.setdefault(name, []).append((index, error))
    response = ctx.spec.response
    topic_result = response.AlterReplicaLogDirTopicResult
    partition_result = topic_result.AlterReplicaLogDirPartitionResult
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        results=[
            topic_result(
                topic_name=name,
                partitions=[partition_result(partition_index=i, error_code=e) for i, e in found],
            )
            for name, found in by_topic.items()
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, 1, 2)
