"""DescribeLogDirs (key 35), versions 1-4: the one log directory and its partitions' sizes.

What tools that show topic sizes on disk ask (kafka-python's `describe_log_dirs`,
@platformatic/kafka's `describeLogDirs`, UIs). One broker, one directory: the data
directory, or "(in memory)" for `--in-memory`, whose volume sizes (v4) are unknown (-1, as
Kafka answers for a volume it cannot read). Every topic's partitions when `topics` is null,
internal ones included, else those asked for that exist; no replica is ever behind or
moving (offset lag 0, never a future replica). With ACLs, as Kafka: Describe on the cluster,
else no directory and (v3+) CLUSTER_AUTHORIZATION_FAILED. v2+ is flexible.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeLogDirsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.storage.log import log_dir

if TYPE_CHECKING:
    from pathlib import Path

    from minicoord.server.broker import Broker

API_KEY = 35
IN_MEMORY = "(in memory)"
UNKNOWN_VOLUME_BYTES = -1
Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicEntry = Result.DescribeLogDirsTopic
PartitionEntry = TopicEntry.DescribeLogDirsPartition


def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        return DescribeLogDirsResponse(
            version=ctx.version,
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results=[],
        )
    broker = ctx.broker
    registry = broker.topics
    if request.topics is None:
        wanted = [(t.name, range(t.partitions)) for t in registry.all()]
    else:
        wanted = []
        for asked in request.topics:
            topic = registry.get(asked.topic)
            if topic is not None:
                indices = [p for p in asked.partitions if 0 <= p < topic.partitions]
                wanted.append((topic.name, indices))
    topics = [
        TopicEntry(
            name=name,
            partitions=[
                PartitionEntry(
                    partition_index=index,
                    partition_size=_size(broker, name, index),
                    offset_lag=0,
                    is_future_key=False,
                )
                for index in indices
            ],
        )
        for name, indices in wanted
    ]
    data_dir = broker.logs.data_dir
    total = usable = UNKNOWN_VOLUME_BYTES
    if data_dir is not None:
        usage = shutil.disk_usage(data_dir)
        total, usable = usage.total, usage.free
    result = Result(
        error_code=ErrorCode.NONE,
        log_dir=log_dir_path(broker),
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
    )
    return DescribeLogDirsResponse(
        version=ctx.version, throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result]
    )


def _size(broker: Broker, topic: str, index: int) -> int:
    """The partition's bytes on its segments; a log not opened yet (still loading after a
    restart, an offsets partition never written) is read from its files."""
    state = broker.data.partitions.get((topic, index))
    if state is not None:
        return state.log.size_bytes
    data_dir = broker.logs.data_dir
    if data_dir is None:
        return 0
    directory = log_dir(data_dir, topic, index)
    return sum(_file_size(f) for f in directory.glob("*.log")) if directory.is_dir() else 0


def log_dir_path(broker: Broker) -> str:
    """The one log directory, as DescribeLogDirs names it."""
    data_dir = broker.logs.data_dir
    return IN_MEMORY if data_dir is None else str(data_dir.resolve())


def _file_size(path: Path) -> int:
    # The loader's thread may delete a segment between the listing and this (finishing an
    # interrupted cleaning's swap): a vanished file holds nothing. Any other OSError is the
    # data directory failing, which halts the server (connection.py), as in Kafka.
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


HANDLER = Handler.for_spec(SPECS[API_KEY], handle, max_version=4)
