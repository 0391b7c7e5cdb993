"""DescribeQuorum (key 55), versions 0-2: the KRaft quorum of the cluster metadata log.

As Kafka 4 answers it for a one-node cluster (ControllerApis.handleDescribeQuorum, then
KafkaRaftClient.handleDescribeQuorumRequest and RaftUtil.singletonDescribeQuorumResponse):
one voter, this node, leading `__cluster_metadata` partition 0 with no observers (a combined
broker and controller is a voter, not an observer). Its log end offset is the end of the
metadata log minicoord keeps (topics, configs, ACLs, SCRAM users), and the high watermark
what of it is written, all of it once its writes are done, as a single voter commits what
it appends. The leader epoch is 1, the epoch a single voter's first election gives it
(minicoord does not count its restarts as elections, where Kafka's epoch would move on each).
v1 adds the fetch and caught-up times, the leader's being now; v2 the replica's directory id,
zero as in a quorum of static voters (controller.quorum.voters, kraft.version 0), and the
voter's endpoints: here the listener the request came in through, at the address Metadata
gives it. Error messages (v2) are "" when there is none, as Kafka's response leaves them.

Anything but exactly one topic named `__cluster_metadata` with exactly partition 0 answers
UNKNOWN_TOPIC_OR_PARTITION for every partition asked (Kafka's hasValidTopicPartition and
getPartitionLevelErrorResponse). Needs Describe on the cluster: else
CLUSTER_AUTHORIZATION_FAILED at the top, "Cluster authorization failed." (the error's own
message, which DescribeQuorumRequest.getErrorResponse uses), and nothing else.
"""

from __future__ import annotations

import uuid
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import METADATA_TOPIC

API_KEY = 55
LEADER_EPOCH = 1
# ReplicaKey.NO_DIRECTORY_ID: the voter of a static quorum has none.
NO_DIRECTORY_ID = uuid.UUID(int=0)
# Errors.CLUSTER_AUTHORIZATION_FAILED.message() and UNKNOWN_TOPIC_OR_PARTITION's.
CLUSTER_DENIED = "Cluster authorization failed."
UNKNOWN = "This server does not host this topic-partition."


def handle(ctx: RequestContext, request: Any) -> Any:
    response = ctx.spec.response
    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        return response(
            version=ctx.version,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=CLUSTER_DENIED,
            topics=[],
            nodes=[],
        )
    topics = request.topics
    valid = (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and [p.partition_index for p in topics[0].partitions] == [0]
    )
    if not valid:
        return _unknown(ctx, topics)
    broker = ctx.broker
    node = broker.config.broker_id
    log_end, high_watermark = broker.metadata_offsets()
    now = broker.now()
    topic_cls = response.TopicData
    partition_cls = topic_cls.PartitionData
    voter = partition_cls.ReplicaState(
        replica_id=node,
        replica_directory_id=NO_DIRECTORY_ID,
        log_end_offset=log_end,
        # For the leader itself Kafka reports now for both.
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    partition = partition_cls(
        partition_index=0,
        error_code=ErrorCode.NONE,
        error_message="",
        leader_id=node,
        leader_epoch=LEADER_EPOCH,
        high_watermark=high_watermark,
        current_voters=[voter],
        observers=[],
    )
    host, port = ctx.channel.address
    endpoint = response.Node.Listener(name=ctx.channel.listener, host=host, port=port)
    return response(
        version=ctx.version,
        error_code=ErrorCode.NONE,
        error_message="",
        topics=[topic_cls(topic_name=METADATA_TOPIC, partitions=[partition])],
        nodes=[response.Node(node_id=node, listeners=[endpoint])],
    )


def _unknown(ctx: RequestContext, topics: list[Any]) -> Any:
    """Every partition asked for, UNKNOWN_TOPIC_OR_PARTITION, the rest of it left at the
    schema's defaults (Kafka's getPartitionLevelErrorResponse)."""
    response = ctx.spec.response
    topic_cls = response.TopicData
    partition_cls = topic_cls.PartitionData
    return response(
        version=ctx.version,
        error_code=ErrorCode.NONE,
        error_message="",
        topics=[
            topic_cls(
                topic_name=t.topic_name,
                partitions=[
                    partition_cls(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=UNKNOWN,
                        leader_id=0,
                        leader_epoch=0,
                        high_watermark=0,
                        current_voters=[],
                        observers=[],
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
        nodes=[],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
