"""What this node tells clients about the cluster: Metadata, DescribeCluster and
DescribeTopicPartitions answer the same facts, each in its own response classes.

The cluster is this one node, a combined broker and controller as a single-node KRaft
cluster is: the only broker (never fenced), the controller clients are told of, and the
leader and only in-sync replica of every partition, at one leader epoch. A broker
listener's answers name the address the client connected to (or the advertised one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.security import authorize
from minicoord.server.topics import LEADER_EPOCH, OFFSETS_TOPIC, Topic

if TYPE_CHECKING:
    from minicoord.server.handlers.base import RequestContext

# Kafka's Topic.isInternal, by name: an answer about a topic that does not exist (yet) says
# whether its name is internal, as Kafka's does.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    # No broker.rack here: Kafka's default, null.
    rack: str | None = None


def brokers(ctx: RequestContext) -> list[BrokerNode]:
    """The brokers of the cluster on the client's listener: this node."""
    host, port = ctx.channel.address
    return [BrokerNode(ctx.broker.config.broker_id, host, port)]


def controller_id(ctx: RequestContext) -> int:
    # A KRaft broker hides the quorum and names a random alive broker as the controller
    # (KRaftMetadataCache.getRandomAliveBrokerId); here the only one, which is also the
    # controller.
    return ctx.broker.config.broker_id


def cluster_operations(ctx: RequestContext) -> set[int]:
    """The cluster's authorized operations, as kafka-python's bitfield set. Kafka computes
    them only for a principal that may describe the cluster, and answers none (0) to
    another (AuthHelper.computeDescribeClusterResponse, KafkaApis.handleTopicMetadataRequest)."""
    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        return set()
    return authorize.operation_set(ctx, authorize.CLUSTER, authorize.CLUSTER_NAME)


def describable_topics(ctx: RequestContext, topics: Iterable[Topic]) -> list[Topic]:
    """The topics (of those given) the principal may describe: "every topic" in Kafka's
    answers leaves the others out without a word."""
    listed = list(topics)
    if ctx.broker.authorizer is None:
        return listed
    hidden = authorize.denied_topics(ctx, authorize.DESCRIBE, (t.name for t in listed))
    return [t for t in listed if t.name not in hidden]


def partitions(cls: Any, node: int, start: int, stop: int, **extra: Any) -> list[Any]:
    """Partitions `start`..`stop`-1 as `cls` (a response's partition class): led by `node`,
    the only replica and in-sync replica, none offline. `extra` sets the fields only that
    response has."""
    return [
        cls(
            error_code=0,
            partition_index=i,
            leader_id=node,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
            **extra,
        )
        for i in range(start, stop)
    ]
