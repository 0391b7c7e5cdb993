"""The wire contract, over a real socket with the raw protocol client.

Every API at every version it is advertised at gets a real request and must answer with a
decodable response; bad input closes the connection with a log line, and the server keeps
serving everyone else.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDirsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeQuorumRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
    ListTransactionsRequest,
    UpdateFeaturesRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from minicoord.clients.connection import ConnectionClosed, ProtocolClient
from minicoord.protocol.apis import SPECS
from minicoord.protocol.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from minicoord.server.app import Server
from minicoord.server.handlers import ADVERTISED_FROM, HandlerRegistry

TOPIC = "topic6"


def batch(*values: bytes) -> bytes:
    """A v2 record batch as a producer sends it (base offset 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=None, key=b"k", value=value, headers=[])
    return bytes(builder.build())


def _sample(key: int, version: int, topic_id: uuid.UUID) -> tuple[Any, Any]:
    """A well-formed request for (key, version), and a check of its response."""
    group = f"wire-{key}-{version}"
    if key == 18:
        req = ApiVersionsRequest(
            version=version, client_software_name="raw", client_software_version="1"
        )
        return req, lambda r: r.error_code == 0 and len(r.api_keys) == len(SPECS)
    if key == 3:
        topics = [MetadataRequest.MetadataRequestTopic(name=TOPIC, topic_id=None)]
        req = MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=False)
        return req, lambda r: [len(t.partitions) for t in r.topics] == [6]
    if key == 60:
        fields: dict[str, Any] = {"include_cluster_authorized_operations": True}
        if version >= 1:
            fields["endpoint_type"] = 1
        if version >= 2:
            fields["include_fenced_brokers"] = False
        req = DescribeClusterRequest(version=version, **fields)
        return (
            req,
            lambda r: (
                r.error_code == 0
                and r.controller_id == 0
                and [b.broker_id for b in r.brokers] == [0]
                and len(r.authorized_operations) == 7
            ),
        )
    if key == 75:
        req = DescribeTopicPartitionsRequest(
            version=version,
            topics=[DescribeTopicPartitionsRequest.TopicRequest(name=TOPIC)],
            response_partition_limit=4,
            cursor=None,
        )
        return (
            req,
            lambda r: (
                [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [(TOPIC, 0, 4)]
                and (r.next_cursor.topic_name, r.next_cursor.partition_index) == (TOPIC, 4)
            ),
        )
    if key == 10:
        req = FindCoordinatorRequest(
            version=version, key=group, key_type=0, coordinator_keys=[group, group + "x"]
        )
        if version < 4:
            return req, lambda r: r.error_code == 0 and r.node_id == 0
        return req, lambda r: [c.error_code for c in r.coordinators] == [0, 0]
    if key == 19:
        topic = CreateTopicsRequest.CreatableTopic(
            name=f"created-{version}",
            num_partitions=2,
            replication_factor=1,
            assignments=[],
            configs=[],
        )
        req = CreateTopicsRequest(
            version=version, topics=[topic], timeout_ms=1000, validate_only=False
        )
        return req, lambda r: [t.error_code for t in r.topics] == [0]
    if key == 2:
        part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=1, current_leader_epoch=-1, timestamp=-1, max_num_offsets=1
        )
        topic = ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[part])
        req = ListOffsetsRequest(
            version=version, replica_id=-1, isolation_level=0, topics=[topic], timeout_ms=1000
        )
        return req, lambda r: r.topics[0].partitions[0].offset == 0
    if key == 1:
        part = FetchRequest.FetchTopic.FetchPartition(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1024,
        )
        topic = FetchRequest.FetchTopic(topic=TOPIC, topic_id=topic_id, partitions=[part])
        req = FetchRequest(
            version=version,
            replica_id=-1,
            max_wait_ms=10,
            min_bytes=1,
            max_bytes=1024,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[topic],
            forgotten_topics_data=[],
            rack_id="",
        )
        return req, lambda r: r.responses[0].partitions[0].error_code == 0
    if key == 11:
        req = JoinGroupRequest(
            version=version,
            group_id=group,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
        expected = ErrorCode.MEMBER_ID_REQUIRED if version >= 4 else ErrorCode.NONE
        return req, lambda r: r.error_code == expected and r.member_id
    if key == 14:
        req = SyncGroupRequest(
            version=version,
            group_id=group,
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        )
        return req, lambda r: r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    if key == 12:
        req = HeartbeatRequest(
            version=version,
            group_id=group,
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
        )
        return req, lambda r: r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    if key == 13:
        member = LeaveGroupRequest.MemberIdentity(
            member_id="nobody", group_instance_id=None, reason=None
        )
        req = LeaveGroupRequest(
            version=version, group_id=group, member_id="nobody", members=[member]
        )
        if version < 3:
            return req, lambda r: r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        return req, lambda r: [m.error_code for m in r.members] == [ErrorCode.UNKNOWN_MEMBER_ID]
    if key == 8:
        part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=2,
            committed_offset=42,
            committed_leader_epoch=-1,
            commit_timestamp=-1,
            committed_metadata="m",
        )
        topic = OffsetCommitRequest.OffsetCommitRequestTopic(
            name=TOPIC, topic_id=topic_id, partitions=[part]
        )
        req = OffsetCommitRequest(
            version=version,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[topic],
        )
        return req, lambda r: r.topics[0].partitions[0].error_code == 0
    if key == 9:
        if version < 8:
            topic = OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])
            req = OffsetFetchRequest(
                version=version, group_id=group, topics=[topic], require_stable=False
            )
            return req, lambda r: r.topics[0].partitions[0].committed_offset == -1
        gtopic = OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
            name=TOPIC, topic_id=topic_id, partition_indexes=[0]
        )
        g = OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, member_id=None, member_epoch=-1, topics=[gtopic]
        )
        req = OffsetFetchRequest(version=version, groups=[g], require_stable=False)
        return req, lambda r: r.groups[0].topics[0].partitions[0].committed_offset == -1
    if key == 15:
        req = DescribeGroupsRequest(
            version=version, groups=[group], include_authorized_operations=False
        )
        expected = ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE
        return (
            req,
            lambda r: r.groups[0].error_code == expected and r.groups[0].group_state == "Dead",
        )
    if key == 16:
        req = ListGroupsRequest(version=version, states_filter=[], types_filter=[])
        return req, lambda r: r.error_code == 0
    if key == 42:
        req = DeleteGroupsRequest(version=version, groups_names=[group])
        return req, lambda r: [x.error_code for x in r.results] == [ErrorCode.GROUP_ID_NOT_FOUND]
    if key == 47:
        part = OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
            partition_index=0
        )
        topic = OffsetDeleteRequest.OffsetDeleteRequestTopic(name=TOPIC, partitions=[part])
        req = OffsetDeleteRequest(version=version, group_id=group, topics=[topic])
        return req, lambda r: r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    if key == 0:
        part = ProduceRequest.TopicProduceData.PartitionProduceData(
            index=2, records=batch(b"a", b"b")
        )
        topic = ProduceRequest.TopicProduceData(
            name=TOPIC, topic_id=topic_id, partition_data=[part]
        )
        req = ProduceRequest(
            version=version, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[topic]
        )

        def produced(r: Any) -> bool:
            p = r.responses[0].partition_responses[0]
            return p.error_code == 0 and p.base_offset >= 0

        return req, produced
    if key == 22:
        req = InitProducerIdRequest(
            version=version,
            transactional_id=None,
            transaction_timeout_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
        )
        return req, lambda r: r.error_code == 0 and r.producer_id >= 0 and r.producer_epoch == 0
    if key == 27:
        # An admin's abort of a producer this partition never saw: the marker is written.
        marker = WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=4242,
            producer_epoch=0,
            transaction_result=False,
            topics=[
                WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
                    name=TOPIC, partition_indexes=[3]
                )
            ],
            coordinator_epoch=-1,
            transaction_version=0,
        )
        req = WriteTxnMarkersRequest(version=version, markers=[marker])
        return (
            req,
            lambda r: (
                [
                    (m.producer_id, t.name, p.partition_index, p.error_code)
                    for m in r.markers
                    for t in m.topics
                    for p in t.partitions
                ]
                == [(4242, TOPIC, 3, 0)]
            ),
        )
    if key in (24, 25, 26, 28):
        return _transaction_sample(key, version, group)
    if key == 61:
        asked = DescribeProducersRequest.TopicRequest(name=TOPIC, partition_indexes=[4])
        req = DescribeProducersRequest(version=version, topics=[asked])
        return (
            req,
            lambda r: (
                [
                    (p.partition_index, p.error_code, p.active_producers)
                    for p in r.topics[0].partitions
                ]
                == [(4, 0, [])]
            ),
        )
    if key == 65:
        # No producer used this id: unknown to the coordinator.
        req = DescribeTransactionsRequest(version=version, transactional_ids=[group])
        return (
            req,
            lambda r: (
                [(t.transactional_id, t.error_code) for t in r.transaction_states]
                == [(group, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)]
            ),
        )
    if key == 66:
        # No transactional producer ran here: the list is empty, an unknown state named back.
        req = ListTransactionsRequest(
            version=version,
            state_filters=["Ongoing", "ongoing"],
            producer_id_filters=[7],
            duration_filter=-1,
            transactional_id_pattern="tx-.*",
        )
        return (
            req,
            lambda r: (
                r.error_code == 0
                and r.unknown_state_filters == ["ongoing"]
                and r.transaction_states == []
            ),
        )
    if key == 23:
        oreq = OffsetForLeaderEpochRequest
        part = oreq.OffsetForLeaderTopic.OffsetForLeaderPartition(
            partition=1, current_leader_epoch=0, leader_epoch=0
        )
        topic = oreq.OffsetForLeaderTopic(topic=TOPIC, partitions=[part])
        req = oreq(version=version, replica_id=-1, topics=[topic])
        return (
            req,
            lambda r: (
                (
                    r.topics[0].partitions[0].error_code,
                    r.topics[0].partitions[0].leader_epoch,
                    r.topics[0].partitions[0].end_offset,
                )
                == (0, 0, 0)
            ),
        )
    if key == 20:
        missing = f"missing-{version}"
        req = DeleteTopicsRequest(
            version=version,
            topic_names=[missing],
            topics=[DeleteTopicsRequest.DeleteTopicState(name=missing, topic_id=None)],
            timeout_ms=1000,
        )
        return (
            req,
            lambda r: [x.error_code for x in r.responses] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        )
    if key == 37:
        t = CreatePartitionsRequest.CreatePartitionsTopic(
            name=f"missing-{version}", count=3, assignments=None
        )
        req = CreatePartitionsRequest(
            version=version, topics=[t], timeout_ms=1000, validate_only=False
        )
        return (
            req,
            lambda r: [x.error_code for x in r.results] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        )
    if key == 21:
        t = DeleteRecordsRequest.DeleteRecordsTopic(
            name=TOPIC,
            partitions=[
                DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
                    partition_index=3, offset=-1
                )
            ],
        )
        req = DeleteRecordsRequest(version=version, topics=[t], timeout_ms=1000)
        return (
            req,
            lambda r: (
                (
                    r.topics[0].partitions[0].error_code,
                    r.topics[0].partitions[0].low_watermark,
                )
                == (0, 0)
            ),
        )
    if key == 32:
        res = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=TOPIC, configuration_keys=None
        )
        req = DescribeConfigsRequest(
            version=version, resources=[res], include_synonyms=True, include_documentation=True
        )

        def described(r: Any) -> bool:
            values = {c.name: c.value for c in r.results[0].configs}
            return r.results[0].error_code == 0 and values["retention.ms"] == "604800000"

        return req, described
    if key == 33:
        areq = AlterConfigsRequest
        res = areq.AlterConfigsResource(
            resource_type=2,
            resource_name=TOPIC,
            configs=[areq.AlterConfigsResource.AlterableConfig(name="retention.ms", value="1000")],
        )
        req = areq(version=version, resources=[res], validate_only=True)
        return req, lambda r: [x.error_code for x in r.responses] == [0]
    if key == 35:
        lreq = DescribeLogDirsRequest
        asked = lreq.DescribableLogDirTopic(topic=TOPIC, partitions=[0, 1])
        req = lreq(version=version, topics=[asked])

        def sized(r: Any) -> bool:
            (result,) = r.results
            return [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
                (TOPIC, [0, 1])
            ]

        return req, sized
    if key == 44:
        ireq = IncrementalAlterConfigsRequest
        res = ireq.AlterConfigsResource(
            resource_type=2,
            resource_name=TOPIC,
            configs=[
                ireq.AlterConfigsResource.AlterableConfig(
                    name="retention.ms", config_operation=0, value="1000"
                )
            ],
        )
        req = ireq(version=version, resources=[res], validate_only=True)
        return req, lambda r: [x.error_code for x in r.responses] == [0]
    if key == 74:
        if version == 0:
            # KIP-714's ListClientMetricsResources: client metrics only, and there are none.
            req = ListConfigResourcesRequest(version=0)
            return req, lambda r: r.error_code == 0 and r.config_resources == []
        req = ListConfigResourcesRequest(version=version, resource_types=[])
        return (
            req,
            lambda r: (
                r.error_code == 0
                and [(c.resource_name, c.resource_type) for c in r.config_resources]
                == [("0", 8), ("0", 4), (TOPIC, 2)]
            ),
        )
    if key == 43:
        # One node leads every partition as its preferred replica: nothing to elect.
        asked = ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0, 5])
        req = ElectLeadersRequest(
            version=version, election_type=0, topic_partitions=[asked], timeout_ms=1000
        )
        not_needed = ErrorCode.ELECTION_NOT_NEEDED
        return req, lambda r: (
            (version == 0 or r.error_code == 0)
            and [(t.topic, [(p.partition_id, p.error_code) for p in t.partition_result])
                 for t in r.replica_election_results]
            == [(TOPIC, [(0, not_needed), (5, not_needed)])]
        )  # fmt: skip
    if key == 45:
        # [this node] is every partition's assignment already: accepted, nothing moves.
        reassign = AlterPartitionReassignmentsRequest.ReassignableTopic
        moved = reassign.ReassignablePartition(partition_index=2, replicas=[0])
        req = AlterPartitionReassignmentsRequest(
            version=version,
            timeout_ms=1000,
            allow_replication_factor_change=True,
            topics=[reassign(name=TOPIC, partitions=[moved])],
        )
        return req, lambda r: (
            r.error_code == 0
            and [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                 for t in r.responses] == [(TOPIC, [(2, 0)])]
        )  # fmt: skip
    if key == 46:
        listed = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
        req = ListPartitionReassignmentsRequest(
            version=version,
            timeout_ms=1000,
            topics=[listed(name=TOPIC, partition_indexes=[0, 1])],
        )
        return req, lambda r: r.error_code == 0 and r.error_message is None and r.topics == []
    if key == 55:
        # One voter, this node, leading the metadata log.
        asked = DescribeQuorumRequest.TopicData
        part = asked.PartitionData(partition_index=0)
        req = DescribeQuorumRequest(
            version=version, topics=[asked(topic_name="__cluster_metadata", partitions=[part])]
        )

        def leads(r: Any) -> bool:
            (topic,) = r.topics
            (p,) = topic.partitions
            voters = [(v.replica_id, v.log_end_offset) for v in p.current_voters]
            return (r.error_code, p.error_code, p.leader_id, p.leader_epoch) == (0, 0, 0, 1) and (
                voters == [(0, p.high_watermark)] and p.high_watermark > 0 and p.observers == []
            )

        return req, leads
    if key == 68:
        req = ConsumerGroupHeartbeatRequest(
            version=version,
            group_id=group,
            member_id=f"member-{version}",
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[TOPIC],
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[],
        )

        def joined(r: Any) -> bool:
            owned = sorted(p for t in r.assignment.topic_partitions for p in t.partitions)
            return r.error_code == 0 and r.member_epoch == 1 and owned == list(range(6))

        return req, joined
    if key == 69:
        req = ConsumerGroupDescribeRequest(
            version=version, group_ids=[group], include_authorized_operations=False
        )
        return req, lambda r: [g.error_code for g in r.groups] == [ErrorCode.GROUP_ID_NOT_FOUND]
    if key == 76:
        req = ShareGroupHeartbeatRequest(
            version=version,
            group_id=group,
            member_id="share-member",
            member_epoch=0,
            rack_id=None,
            subscribed_topic_names=[TOPIC],
        )

        def shared(r: Any) -> bool:
            owned = sorted(p for t in r.assignment.topic_partitions for p in t.partitions)
            return (r.error_code, r.member_epoch, owned) == (0, 1, list(range(6)))

        return req, shared
    if key == 77:
        req = ShareGroupDescribeRequest(
            version=version, group_ids=[group], include_authorized_operations=False
        )
        return req, lambda r: [g.error_code for g in r.groups] == [ErrorCode.GROUP_ID_NOT_FOUND]
    if key == 78:
        asked = ShareFetchRequest.FetchTopic
        req = ShareFetchRequest(
            version=version,
            group_id=group,
            member_id="share-member",
            share_session_epoch=0,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=[
                asked(
                    topic_id=topic_id,
                    partitions=[
                        asked.FetchPartition(partition_index=0, acknowledgement_batches=[])
                    ],
                )
            ],
            forgotten_topics_data=[],
        )

        def opened(r: Any) -> bool:
            (t,) = r.responses
            (p,) = t.partitions
            return (r.error_code, t.topic_id, p.partition_index, p.error_code, p.records) == (
                0,
                topic_id,
                0,
                0,
                b"",
            )

        return req, opened
    if key == 79:
        req = ShareAcknowledgeRequest(
            version=version,
            group_id=group,
            member_id="share-member",
            share_session_epoch=0,
            topics=[],
        )
        return req, lambda r: r.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    if key == 90:
        asked = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        topics = [asked.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[0])]
        req = DescribeShareGroupOffsetsRequest(
            version=version, groups=[asked(group_id=group, topics=topics)]
        )

        def described(r: Any) -> bool:
            (g,) = r.groups
            (t,) = g.topics
            (p,) = t.partitions
            return (g.error_code, t.topic_id, p.start_offset, p.error_code) == (
                0,
                topic_id,
                -1,
                0,
            )

        return req, described
    if key == 91:
        asked = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        part = asked.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)
        req = AlterShareGroupOffsetsRequest(
            version=version, group_id=group, topics=[asked(topic_name=TOPIC, partitions=[part])]
        )
        return (
            req,
            lambda r: (
                r.error_code == 0
                and [[p.error_code for p in t.partitions] for t in r.responses] == [[0]]
            ),
        )
    if key == 92:
        asked = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
        req = DeleteShareGroupOffsetsRequest(
            version=version, group_id=group, topics=[asked(topic_name=TOPIC)]
        )
        return req, lambda r: r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # The ACL APIs on a server without an authorizer: SECURITY_DISABLED, as Kafka answers.
    disabled = ErrorCode.SECURITY_DISABLED
    if key == 30:
        creation = CreateAclsRequest.AclCreation(
            resource_type=3,
            resource_name=group,
            resource_pattern_type=3,
            principal="User:*",
            host="*",
            operation=3,
            permission_type=3,
        )
        req = CreateAclsRequest(version=version, creations=[creation])
        return req, lambda r: [x.error_code for x in r.results] == [disabled]
    if key == 29:
        req = DescribeAclsRequest(
            version=version,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        return req, lambda r: r.error_code == disabled
    if key == 31:
        flt = DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        req = DeleteAclsRequest(version=version, filters=[flt])
        return req, lambda r: [x.error_code for x in r.filter_results] == [disabled]
    if key in (17, 36, 50, 51):
        return _security_sample(key, version)
    if key in (38, 39, 40, 41):
        return _delegation_token_sample(key, version)
    if key == 64:
        # Another broker's id: not registered (this node's own is answered NONE).
        from minicoord.protocol.unregister_broker_apis import UnregisterBrokerRequest

        req = UnregisterBrokerRequest(version=version, broker_id=7)
        not_registered = ErrorCode.BROKER_ID_NOT_REGISTERED
        return req, lambda r: (r.error_code, r.error_message) == (not_registered, None)
    if key == 49:
        # Each version sets its own user's quota; 48 reads none back.
        entry = AlterClientQuotasRequest.EntryData
        user = f"wire-{version}"
        req = AlterClientQuotasRequest(
            version=version,
            entries=[
                entry(
                    entity=[entry.EntityData(entity_type="user", entity_name=user)],
                    ops=[entry.OpData(key="producer_byte_rate", value=1024.0, remove=False)],
                )
            ],
            validate_only=False,
        )
        return (
            req,
            lambda r: (
                [
                    (e.error_code, [(x.entity_type, x.entity_name) for x in e.entity])
                    for e in r.entries
                ]
                == [(0, [("user", user)])]
            ),
        )
    if key == 48:
        component = DescribeClientQuotasRequest.ComponentData(
            entity_type="user", match_type=0, match="wire-none"
        )
        req = DescribeClientQuotasRequest(version=version, components=[component], strict=False)
        return req, lambda r: r.error_code == 0 and r.entries == []
    if key == 34:
        # Into a directory this node does not have: LOG_DIR_NOT_FOUND, as Kafka answers.
        move = AlterReplicaLogDirsRequest.AlterReplicaLogDir(
            path="/nowhere",
            topics=[AlterReplicaLogDirsRequest.AlterReplicaLogDir.AlterReplicaLogDirTopic(
                name=TOPIC, partitions=[0]
            )],
        )  # fmt: skip
        req = AlterReplicaLogDirsRequest(version=version, dirs=[move])
        return (
            req,
            lambda r: (
                [
                    (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
                    for t in r.results
                ]
                == [(TOPIC, [(0, ErrorCode.LOG_DIR_NOT_FOUND)])]
            ),
        )
    if key == 57:
        # group.version at the level it is finalized at: accepted, nothing changes.
        update = UpdateFeaturesRequest.FeatureUpdateKey(
            feature="group.version", max_version_level=1, allow_downgrade=False, upgrade_type=1
        )
        req = UpdateFeaturesRequest(
            version=version, timeout_ms=1000, feature_updates=[update], validate_only=False
        )
        named = [("group.version", 0, "NONE")] if version <= 1 else []
        return (
            req,
            lambda r: (
                r.error_code == 0
                and [(x.feature, x.error_code, x.error_message) for x in r.results] == named
            ),
        )
    raise AssertionError(f"no sample for API {key}")


def _security_sample(key: int, version: int) -> tuple[Any, Any]:
    """On a PLAINTEXT listener Kafka answers the SASL APIs with ILLEGAL_SASL_STATE."""
    from kafka.protocol.admin import (
        AlterUserScramCredentialsRequest,
        DescribeUserScramCredentialsRequest,
    )
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    if key == 17:
        req: Any = SaslHandshakeRequest(version=version, mechanism="PLAIN")
        return req, lambda r: r.error_code == ErrorCode.ILLEGAL_SASL_STATE
    if key == 36:
        req = SaslAuthenticateRequest(version=version, auth_bytes=b"\x00u\x00p")
        return req, lambda r: r.error_code == ErrorCode.ILLEGAL_SASL_STATE
    if key == 50:
        req = DescribeUserScramCredentialsRequest(version=version, users=[])
        return req, lambda r: r.error_code == 0 and r.results == []
    upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name="wire-user", mechanism=2, iterations=4096, salt=b"salt", salted_password=b"x" * 64
    )
    req = AlterUserScramCredentialsRequest(version=version, deletions=[], upsertions=[upsert])
    return req, lambda r: [(x.user, x.error_code) for x in r.results] == [("wire-user", 0)]


def _delegation_token_sample(key: int, version: int) -> tuple[Any, Any]:
    """On a PLAINTEXT listener Kafka refuses every token request before anything else, with
    -1 for the timestamps (its DelegationTokenManager.ErrorTimestamp)."""
    from minicoord.protocol import delegation_token_apis as apis

    not_allowed = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    if key == 38:
        fields = (
            {"owner_principal_type": None, "owner_principal_name": None} if version >= 3 else {}
        )
        req: Any = apis.CreateDelegationTokenRequest(
            version=version, renewers=[], max_lifetime_ms=-1, **fields
        )
        return (
            req,
            lambda r: (
                (r.error_code, r.principal_type, r.principal_name, r.token_id, r.hmac)
                == (not_allowed, "User", "ANONYMOUS", "", b"")
                and (r.issue_timestamp_ms, r.expiry_timestamp_ms, r.max_timestamp_ms)
                == (-1, -1, -1)
            ),
        )
    if key in (39, 40):
        period = {"renew_period_ms": 1000} if key == 39 else {"expiry_time_period_ms": -1}
        cls = apis.RenewDelegationTokenRequest if key == 39 else apis.ExpireDelegationTokenRequest
        req = cls(version=version, hmac=b"not-a-token", **period)
        return req, lambda r: (r.error_code, r.expiry_timestamp_ms) == (not_allowed, -1)
    req = apis.DescribeDelegationTokenRequest(version=version, owners=None)
    return req, lambda r: (r.error_code, r.tokens) == (not_allowed, [])


CASES = [
    (h.spec.key, v)
    for h in HandlerRegistry.default()
    for v in range(h.min_version, h.max_version + 1)
]


def _transaction_sample(key: int, version: int, tid: str) -> tuple[Any, Any]:
    """A transaction request for an id no InitProducerId made: the coordinator knows no such
    producer (INVALID_PRODUCER_ID_MAPPING), as Kafka's answers an unknown transactional id."""
    mapping = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if key == 24:
        topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[1])
        req = AddPartitionsToTxnRequest(
            version=version,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=5,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[topic],
        )
        return (
            req,
            lambda r: (
                [
                    (
                        t.name,
                        [
                            (p.partition_index, p.partition_error_code)
                            for p in t.results_by_partition
                        ],
                    )
                    for t in r.results_by_topic_v3_and_below
                ]
                == [(TOPIC, [(1, mapping)])]
            ),
        )
    if key == 25:
        req = AddOffsetsToTxnRequest(
            version=version, transactional_id=tid, producer_id=5, producer_epoch=0, group_id=tid
        )
        return req, lambda r: r.error_code == mapping
    if key == 26:
        req = EndTxnRequest(
            version=version, transactional_id=tid, producer_id=5, producer_epoch=0, committed=True
        )
        return req, lambda r: r.error_code == mapping
    part = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
        partition_index=2, committed_offset=9, committed_leader_epoch=-1, committed_metadata=""
    )
    topics = [TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[part])]
    req = TxnOffsetCommitRequest(
        version=version,
        transactional_id=tid,
        group_id=tid,
        producer_id=5,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=topics,
    )
    return (
        req,
        lambda r: (
            [(p.partition_index, p.error_code) for t in r.topics for p in t.partitions]
            == [(2, mapping)]
        ),
    )


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{SPECS[k].name}-v{v}" for k, v in CASES])
async def test_every_api_at_every_advertised_version(
    inproc_server: Server, raw_client: ProtocolClient, key: int, version: int
) -> None:
    topic_id = inproc_server.broker.topics.get(TOPIC).topic_id
    request, check = _sample(key, version, topic_id)
    response = await asyncio.wait_for(raw_client.request(request, version), 5)
    assert check(response), response


async def test_api_versions_advertises_exactly_the_handlers(raw_client: ProtocolClient) -> None:
    response = await raw_client.request(
        ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1")
    )
    advertised = {(k.api_key, k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {
        (h.spec.key, ADVERTISED_FROM.get(h.spec.key, h.min_version), h.max_version)
        for h in HandlerRegistry.default()
    }
    # Produce from v0, as Kafka 4 lists it (KAFKA-18659), though v0-2 close the connection.
    assert (0, 0, 13) in advertised
    assert (11, 0, 9) in advertised and (18, 0, 4) in advertised and (10, 0, 6) in advertised


@pytest.mark.parametrize("version", [3, 4])
async def test_api_versions_reports_the_features_of_a_kafka_4_0_broker(
    raw_client: ProtocolClient, version: int
) -> None:
    request = ApiVersionsRequest(
        version=version, client_software_name="t", client_software_version="1"
    )
    response = await raw_client.request(request)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features
    }
    # metadata.version from 3.3-IV3 to 4.0-IV3, finalized at 4.0-IV3, as on Kafka 4.0.0;
    # group.version and kraft.version, whose lowest level is 0, among the supported only from
    # v4 (KAFKA-17011); kraft.version not finalized (level 0, a static quorum).
    expected = {"metadata.version": (7, 25)}
    if version >= 4:
        expected["group.version"] = (0, 1)
        expected["kraft.version"] = (0, 1)
        expected["share.version"] = (0, 1)
    assert supported == expected
    # share.version at 1, as a Kafka 4.2 cluster starts.
    assert finalized == {
        "metadata.version": (25, 25),
        "group.version": (1, 1),
        "share.version": (1, 1),
    }
    assert response.finalized_features_epoch >= 0


async def test_api_versions_from_the_future_gets_v0_with_its_own_range(
    raw_client: ProtocolClient,
) -> None:
    # KIP-511: the client sends its newest version; we answer at v0 with UNSUPPORTED_VERSION.
    header = struct.pack(">hhih", 18, 99, 5, 3) + b"raw" + b"\x00"
    body = await asyncio.wait_for(raw_client.request_raw(header + b"\x00\x00\x00", 5), 5)
    (correlation, error, count, key, low, high) = struct.unpack_from(">ihihhh", body, 0)
    assert (correlation, error) == (5, ErrorCode.UNSUPPORTED_VERSION)
    # Only ApiVersions' own versions, as Kafka's ApiVersionsRequest.getErrorResponse.
    assert (count, key, low, high) == (1, 18, 0, 4)


@pytest.mark.parametrize(("key", "version"), [(12, 42), (0, 2), (1, 3)])
async def test_unsupported_version_of_a_known_api_closes_the_connection(
    raw_client: ProtocolClient, key: int, version: int
) -> None:
    # Kafka's SocketServer.parseRequestHeader closes it (versions above ours, and below:
    # Heartbeat v42, Produce v2, Fetch v3); an answer in another layout left clients hanging.
    header = struct.pack(">hhih", key, version, 9, 3) + b"raw"
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(raw_client.request_raw(header, 9), 5)


async def _assert_closed(client: ProtocolClient) -> None:
    await asyncio.wait_for(client.closed.wait(), 5)


async def test_unknown_api_key_closes_with_a_log_line(
    raw_client: ProtocolClient, caplog: pytest.LogCaptureFixture
) -> None:
    # An INFO line of the request log, limited per client: a retry loop cannot flood the log.
    with caplog.at_level(logging.INFO, "minicoord.requests"), pytest.raises(ConnectionClosed):
        await asyncio.wait_for(
            raw_client.request_raw(struct.pack(">hhih", 80, 0, 1, 3) + b"raw", 1), 5
        )
    assert "refused AddRaftVoter v0" in caplog.text and "client_id=raw" in caplog.text
    assert "API key 80 is not one minicoord serves" in caplog.text


async def test_oversized_frame_closes_before_its_body(inproc_server: Server) -> None:
    limit = inproc_server.config.socket_request_max_bytes
    reader, writer = await asyncio.open_connection("127.0.0.1", inproc_server.port)
    writer.write(struct.pack(">i", limit + 1))  # the body is never sent
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">i", -1),
        struct.pack(">i", 3) + b"abc",  # shorter than a header
        struct.pack(">i", 12) + struct.pack(">hhih", 11, 5, 1, 2) + b"ab",  # JoinGroup, no body
        # JoinGroup v5 whose protocol array claims two billion entries in a tiny frame.
        struct.pack(">i", 25)
        + struct.pack(">hhih", 11, 5, 1, -1)
        + struct.pack(">h", 1)
        + b"g"
        + struct.pack(">ii", 6000, 6000)
        + struct.pack(">hhhi", 0, -1, 0, 0x7FFFFFFF),
    ],
    ids=["negative-length", "short-header", "missing-body", "absurd-array-count"],
)
async def test_bad_input_closes_only_that_connection(inproc_server: Server, payload: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", inproc_server.port)
    writer.write(payload)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    # Everyone else is still served.
    async with await ProtocolClient.connect("127.0.0.1", inproc_server.port) as other:
        response = await asyncio.wait_for(other.request(ApiVersionsRequest(version=0)), 5)
        assert response.error_code == 0


def _long_poll(server: Server) -> Any:
    """A Fetch v11 that waits 300 ms for records that do not come: a parked answer."""
    fetch, _ = _sample(1, 11, server.broker.topics.get(TOPIC).topic_id)
    fetch.max_wait_ms = 300
    return fetch


async def test_responses_keep_request_order_behind_a_parked_reply(
    raw_client: ProtocolClient, inproc_server: Server
) -> None:
    fetch = _long_poll(inproc_server)
    order: list[str] = []

    async def tracked(name: str, request: Any, version: int) -> None:
        await raw_client.request(request, version)
        order.append(name)

    await asyncio.wait_for(
        asyncio.gather(
            tracked("fetch", fetch, 11),
            tracked("api_versions", ApiVersionsRequest(version=0), 0),
        ),
        5,
    )
    # The fetch long-polls for 300 ms; the ApiVersions behind it must wait its turn.
    assert order == ["fetch", "api_versions"]


async def test_produce_with_acks_0_gets_no_answer(raw_client: ProtocolClient) -> None:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch(b"x"))
    request = ProduceRequest(
        version=9,
        transactional_id=None,
        acks=0,
        timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[part])],
    )
    request.with_header(correlation_id=41, client_id="raw")
    raw_client.send_bytes(bytes(request.encode(header=True, framed=True)))
    # The next request's answer is the first to arrive: nothing was sent for acks=0.
    response = await asyncio.wait_for(raw_client.request(ApiVersionsRequest(version=0)), 5)
    assert response.error_code == 0


async def test_a_failed_acks_0_produce_closes_the_connection(
    raw_client: ProtocolClient, caplog: pytest.LogCaptureFixture
) -> None:
    # As Kafka does: the producer gets no answer to learn from, so the connection closes.
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=None)
    request = ProduceRequest(
        version=9,
        transactional_id=None,
        acks=0,
        timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[part])],
    )
    request.with_header(correlation_id=42, client_id="raw")
    with caplog.at_level(logging.WARNING, "minicoord.connection"):
        raw_client.send_bytes(bytes(request.encode(header=True, framed=True)))
        await _assert_closed(raw_client)
    assert "acks=0 Produce failed (INVALID_RECORD" in caplog.text


async def test_a_commit_too_big_for_one_read_is_decoded_and_answered_whole(
    raw_client: ProtocolClient,
) -> None:
    # Frames of 64 KiB and more reach the hand-written decoders as memoryviews.
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    partitions = [
        Partition(
            partition_index=i, committed_offset=100 + i, committed_leader_epoch=-1,
            committed_metadata="é" * 30,
        )
        for i in range(3000)
    ]  # fmt: skip
    req = OffsetCommitRequest(
        group_id="big-commit",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[Topic(name=TOPIC, partitions=partitions)],
    )
    assert len(bytes(req.encode(version=9))) > 64 * 1024
    resp = await raw_client.request(req, 9)
    errors = [p.error_code for p in resp.topics[0].partitions]
    # topic6 has six partitions: those commit, the rest do not exist.
    assert errors == [0] * 6 + [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2994
    fetched = await raw_client.request(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id="big-commit",
                    member_id=None,
                    member_epoch=-1,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                            name=TOPIC, partition_indexes=list(range(6))
                        )
                    ],
                )
            ],
            require_stable=False,
        ),
        8,
    )
    got = [(p.committed_offset, p.metadata) for p in fetched.groups[0].topics[0].partitions]
    assert got == [(100 + i, "é" * 30) for i in range(6)]


@pytest.mark.parametrize("version", [8, 9])
async def test_one_partition_commits_answer_each_partition_as_the_general_path(
    raw_client: ProtocolClient, version: int
) -> None:
    # The one-partition shape has a path of its own (OneCommit); a topic or partition it
    # cannot commit takes the general path, with the same answers.
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    group = f"one-partition-{version}"

    async def commit(topic: str, index: int, offset: int) -> int:
        req = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None,
            topics=[Topic(name=topic, partitions=[Partition(
                partition_index=index, committed_offset=offset, committed_leader_epoch=4,
                committed_metadata="")])],
        )  # fmt: skip
        resp = await raw_client.request(req, version)
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [
            (topic, [index])
        ]
        return int(resp.topics[0].partitions[0].error_code)

    assert await commit(TOPIC, 5, 77) == ErrorCode.NONE
    assert await commit(TOPIC, 6, 78) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await commit("no-such-topic", 0, 79) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fetched = await raw_client.request(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group, member_id=None, member_epoch=-1,
                    topics=[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=TOPIC, partition_indexes=[5])],
                )
            ],
            require_stable=False,
        ),
        8,
    )  # fmt: skip
    (p,) = fetched.groups[0].topics[0].partitions
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (77, 4, "")


async def test_a_null_inside_a_string_array_closes_the_connection(
    raw_client: ProtocolClient, caplog: pytest.LogCaptureFixture
) -> None:
    # DescribeGroups v0: an array of one group id whose string length is -1 (null). Kafka's
    # readers refuse a null element; handlers may rely on the schema.
    body = struct.pack(">ih", 1, -1)
    with caplog.at_level(logging.WARNING, "minicoord.connection"), pytest.raises(ConnectionClosed):
        await asyncio.wait_for(
            raw_client.request_raw(struct.pack(">hhih", 15, 0, 1, 1) + b"c" + body, 1), 5
        )
    assert "non-nullable groups[] is null" in caplog.text


async def test_metadata_answers_follow_topic_changes(raw_client: ProtocolClient) -> None:
    # Metadata answers are kept while no topic changes: every change must show at once.
    def ask(version: int) -> MetadataRequest:
        return MetadataRequest(
            version=version,
            topics=[MetadataRequest.MetadataRequestTopic(name="grows", topic_id=None)],
            allow_auto_topic_creation=False,
        )

    async def partitions(version: int) -> tuple[int, int]:
        r = await raw_client.request(ask(version), version)
        return r.topics[0].error_code, len(r.topics[0].partitions)

    for version in (9, 12):
        assert await partitions(version) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)
    topic = CreateTopicsRequest.CreatableTopic(
        name="grows", num_partitions=2, replication_factor=1, assignments=[], configs=[]
    )
    await raw_client.request(CreateTopicsRequest(topics=[topic], timeout_ms=1000), 7)
    for version in (9, 12):
        assert await partitions(version) == (0, 2)
        assert await partitions(version) == (0, 2)  # asked again: the kept answer
    grow = CreatePartitionsRequest.CreatePartitionsTopic(name="grows", count=5, assignments=None)
    await raw_client.request(
        CreatePartitionsRequest(topics=[grow], timeout_ms=1000, validate_only=False), 3
    )
    for version in (9, 12):
        assert await partitions(version) == (0, 5)
    drop = DeleteTopicsRequest.DeleteTopicState(name="grows", topic_id=None)
    await raw_client.request(DeleteTopicsRequest(topics=[drop], timeout_ms=1000), 6)
    for version in (9, 12):
        assert await partitions(version) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)


async def test_metadata_authorized_operations_cover_unknown_and_invalid_names(
    raw_client: ProtocolClient,
) -> None:
    # Kafka sets a topic's authorized operations on every topic the principal may describe,
    # whatever its error (KafkaApis.handleTopicMetadataRequest); not on an unknown topic id.
    async def ask(*asked: Any) -> list[tuple[int, Any]]:
        request = MetadataRequest(
            version=12,
            topics=list(asked),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=True,
        )
        answer = await raw_client.request(request, 12)
        return [(t.error_code, t.authorized_operations) for t in answer.topics]

    topic = MetadataRequest.MetadataRequestTopic
    got = await ask(
        topic(name=TOPIC, topic_id=None),
        topic(name="no-such-topic", topic_id=None),
        topic(name="bad name!", topic_id=None),
    )
    everything = got[0][1]
    assert got[0][0] == ErrorCode.NONE and everything
    assert got[1:] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, everything),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, everything),
    ]
    # (None: the schema's default, Int.MinValue, "not computed")
    assert await ask(topic(name=None, topic_id=uuid.uuid4())) == [
        (ErrorCode.UNKNOWN_TOPIC_ID, None)
    ]


async def test_metadata_with_a_topic_id_is_answered_by_ids_alone(
    raw_client: ProtocolClient,
) -> None:
    """As KafkaApis.handleTopicMetadataRequest: one non-zero topic id and the request is
    answered by its ids, each once, the names beside them ignored. The Java admin client's
    describeTopics(TopicCollection.ofTopicIds(...)) sends each id with the name its schema
    defaults to, "" (and reads the answer by id, failing on an entry without one)."""
    topic = MetadataRequest.MetadataRequestTopic
    every = await raw_client.request(
        MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False),
        12,
    )  # fmt: skip
    (known,) = [t.topic_id for t in every.topics if t.name == TOPIC]
    unknown = uuid.uuid4()
    request = MetadataRequest(
        version=12,
        topics=[
            topic(name="", topic_id=known),
            topic(name="", topic_id=unknown),
            topic(name="", topic_id=known),
            topic(name="no-such-topic", topic_id=None),
        ],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    answer = await raw_client.request(request, 12)
    assert [(t.name, t.topic_id, t.error_code) for t in answer.topics] == [
        (TOPIC, known, ErrorCode.NONE),
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID),
    ]


@pytest.mark.parametrize(
    ("session_id", "epoch", "expected"),
    [
        (0, -1, ErrorCode.NONE),  # sessionless, what the Python clients send
        (0, 0, ErrorCode.NONE),  # full, asking for a session (none is made here)
        (123, -1, ErrorCode.NONE),  # full, closing session 123 (Java's close): no error
        (123, 0, ErrorCode.NONE),  # full: a named session is closed, a new one may start
        (123, 5, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # incremental on an unknown session
        (0, 5, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # incremental on session 0: none
    ],
)
async def test_fetch_sessions_are_decided_by_the_epoch_as_kafka(
    inproc_server: Server, raw_client: ProtocolClient, session_id: int, epoch: int, expected: int
) -> None:
    # Kafka's FetchSession.newContext: epoch 0 or -1 is a full fetch whatever the session id
    # (FetchMetadata.isFull); any other epoch needs the session, and none exists here.
    topic_id = inproc_server.broker.topics.get(TOPIC).topic_id
    request, _ = _sample(1, 12, topic_id)
    request.session_id, request.session_epoch = session_id, epoch
    answer = await asyncio.wait_for(raw_client.request(request, 12), 5)
    assert (answer.error_code, answer.session_id) == (expected, 0)
    served = [p.error_code for t in answer.responses for p in t.partitions]
    assert served == ([] if expected else [ErrorCode.NONE])


@pytest.mark.parametrize(
    ("name", "version", "valid"),
    [
        ("librdkafka", "2.16.0", True),
        ("apache-kafka-java", "4.0.0-SNAPSHOT", True),
        ("", "1", False),
        ("-bad", "1", False),
        ("my client", "1", False),
        ("ok", "1.0-", False),
    ],
)
async def test_api_versions_checks_the_client_software_as_kip_511(
    raw_client: ProtocolClient, name: str, version: str, valid: bool
) -> None:
    # ApiVersionsRequest.isValid: an invalid name or version is INVALID_REQUEST with no list,
    # in the request's version (kafka-python decodes an error answer as v0, so this reads
    # the bytes), and the connection stays open.
    def compact(text: str) -> bytes:
        return bytes([len(text) + 1]) + text.encode()

    header = struct.pack(">hhih", 18, 3, 7, 3) + b"raw" + b"\x00"
    body = await asyncio.wait_for(
        raw_client.request_raw(header + compact(name) + compact(version) + b"\x00", 7), 5
    )
    correlation, error = struct.unpack_from(">ih", body, 0)
    assert correlation == 7
    if valid:
        assert error == ErrorCode.NONE and body[6] == len(SPECS) + 1  # compact array length
    else:
        assert (error, body[6:]) == (ErrorCode.INVALID_REQUEST, b"\x01" + bytes(4) + b"\x00")
    again = ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1")
    assert (await asyncio.wait_for(raw_client.request(again, 3), 5)).error_code == ErrorCode.NONE


async def test_a_client_that_shuts_its_side_still_gets_every_answer(
    raw_client: ProtocolClient, inproc_server: Server
) -> None:
    # shutdown(SHUT_WR) after a long-polling Fetch and an ApiVersions behind it: Kafka reads
    # no end of stream while a request is in hand, so both answers come, in order, then the
    # close. The answers were dropped with the connection.
    fetch = _long_poll(inproc_server)
    frames = b""
    for correlation, (request, version) in enumerate(
        [(fetch, 11), (ApiVersionsRequest(version=0), 0)], start=41
    ):
        prepared = raw_client.prepare(request, version)
        frames += prepared.head + struct.pack(">i", correlation) + prepared.tail
    reader, writer = await asyncio.open_connection("127.0.0.1", inproc_server.port)
    writer.write(frames)
    await writer.drain()
    writer.write_eof()
    received = await asyncio.wait_for(reader.read(), 5)  # to the server's close
    writer.close()
    correlations = []
    at = 0
    while at < len(received):
        (size, correlation) = struct.unpack_from(">ii", received, at)
        correlations.append(correlation)
        at += 4 + size
    assert correlations == [41, 42]


async def test_the_offsets_topic_exists_from_the_first_group_coordinator_lookup(
    raw_client: ProtocolClient,
) -> None:
    # Kafka creates __consumer_offsets on the first FindCoordinator for a group (or a Metadata
    # request naming it, with auto-creation): a fresh server lists only the topics made.
    async def listed() -> dict[str, tuple[bool, int]]:
        request = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)
        answer = await raw_client.request(request, 12)
        return {t.name: (t.is_internal, len(t.partitions)) for t in answer.topics}

    async def named(allow: bool) -> int:
        topic = MetadataRequest.MetadataRequestTopic(name="__consumer_offsets", topic_id=None)
        request = MetadataRequest(version=12, topics=[topic], allow_auto_topic_creation=allow)
        return int((await raw_client.request(request, 12)).topics[0].error_code)

    async def list_offsets() -> int:
        part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1
        )
        topic = ListOffsetsRequest.ListOffsetsTopic(name="__consumer_offsets", partitions=[part])
        request = ListOffsetsRequest(
            version=7, replica_id=-1, isolation_level=0, topics=[topic], timeout_ms=1000
        )
        return int((await raw_client.request(request, 7)).topics[0].partitions[0].error_code)

    assert await listed() == {"topic6": (False, 6)}
    assert await named(False) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await list_offsets() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # as any absent topic
    assert await listed() == {"topic6": (False, 6)}
    found = await raw_client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 4)
    assert found.coordinators[0].error_code == ErrorCode.NONE
    assert await listed() == {"topic6": (False, 6), "__consumer_offsets": (True, 50)}
    assert await named(False) == ErrorCode.NONE
    assert await list_offsets() == ErrorCode.NONE


async def test_any_key_has_a_coordinator_with_kafkas_messages(raw_client: ProtocolClient) -> None:
    # Kafka looks up any key, the empty one too (it keeps offsets of group "" for old
    # clients); before v4 the message is Errors.message(), "NONE" on success, and from v4
    # there is none per key.
    for version, key_type in ((0, 0), (1, 0), (1, 1), (3, 0), (3, 1)):
        request = FindCoordinatorRequest(version=version, key="", key_type=key_type)
        found = await raw_client.request(request, version)
        assert (found.error_code, found.node_id) == (ErrorCode.NONE, 0), (version, key_type)
        if version >= 1:
            assert found.error_message == "NONE"
    batched = FindCoordinatorRequest(version=4, key_type=1, coordinator_keys=["", "t"])
    found = await raw_client.request(batched, 4)
    assert [(c.key, c.error_code, c.node_id, c.error_message) for c in found.coordinators] == [
        ("", ErrorCode.NONE, 0, None),
        ("t", ErrorCode.NONE, 0, None),
    ]
    # A key type Kafka has no coordinator for fails the request: the error's own text.
    text = "This most likely occurs because of a request being malformed by the client library"
    found = await raw_client.request(FindCoordinatorRequest(version=3, key="g", key_type=7), 3)
    assert (found.error_code, found.node_id) == (ErrorCode.INVALID_REQUEST, -1)
    assert found.error_message.startswith(text)
    batched = FindCoordinatorRequest(version=4, key_type=7, coordinator_keys=["a", "b"])
    found = await raw_client.request(batched, 4)
    assert [(c.key, c.error_code) for c in found.coordinators] == [
        ("a", ErrorCode.INVALID_REQUEST),
        ("b", ErrorCode.INVALID_REQUEST),
    ]
    assert all(c.error_message.startswith(text) for c in found.coordinators)


async def test_a_metadata_request_naming_the_offsets_topic_creates_it(
    raw_client: ProtocolClient,
) -> None:
    topic = MetadataRequest.MetadataRequestTopic(name="__consumer_offsets", topic_id=None)
    request = MetadataRequest(version=12, topics=[topic], allow_auto_topic_creation=True)
    answer = (await raw_client.request(request, 12)).topics[0]
    assert (answer.error_code, answer.is_internal, len(answer.partitions)) == (0, True, 50)
    every = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)
    assert "__consumer_offsets" in {t.name for t in (await raw_client.request(every, 12)).topics}


@pytest.mark.asyncio
async def test_a_commit_to_a_missing_partition_names_the_partition_not_the_topic_id(
    inproc_server: Server, raw_client: ProtocolClient
) -> None:
    # KafkaApis: UNKNOWN_TOPIC_ID only for an id it does not know; a known topic's partition
    # that does not exist is UNKNOWN_TOPIC_OR_PARTITION, whether named by id (v10) or name.
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    known = inproc_server.broker.topics.get(TOPIC).topic_id

    def commit(version: int, topic_id: uuid.UUID, partition: int) -> Any:
        part = Partition(
            partition_index=partition,
            committed_offset=1,
            committed_leader_epoch=-1,
            commit_timestamp=-1,
            committed_metadata=None,
        )
        return OffsetCommitRequest(
            version=version,
            group_id="missing-partition",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[Topic(name=TOPIC, topic_id=topic_id, partitions=[part])],
        )

    for version, topic_id, partition, expected in [
        (10, known, 99, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (10, uuid.uuid4(), 0, ErrorCode.UNKNOWN_TOPIC_ID),
        (9, known, 99, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (10, known, 0, ErrorCode.NONE),
    ]:
        answer = await raw_client.request(commit(version, topic_id, partition), version)
        assert answer.topics[0].partitions[0].error_code == expected, (version, partition)
