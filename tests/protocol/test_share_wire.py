"""Share groups over the raw protocol: the share session's epochs and the refusals Kafka 4.2
answers with (KafkaApis, SharePartitionManager, GroupMetadataManager), which a stock client
meets only when something is wrong."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    UpdateFeaturesRequest,
)
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.consumer_group_apis import ConsumerGroupDescribeRequest
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

TOPIC = "topic6"
Fetched = ShareFetchRequest.FetchTopic


async def ask(client: ProtocolClient, request: Any) -> Any:
    return await asyncio.wait_for(client.request(request), 5)


def join(group: str, member: str = "m1", epoch: int = 0) -> Any:
    return ShareGroupHeartbeatRequest(
        version=1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=[TOPIC] if epoch == 0 else None,
    )


def fetch(
    group: str, epoch: int, topic_id: Any = None, acks: list[Any] | None = None, member: str = "m1"
) -> Any:
    partitions = [Fetched.FetchPartition(partition_index=0, acknowledgement_batches=acks or [])]
    return ShareFetchRequest(
        version=1,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=100,
        batch_size=100,
        topics=[] if topic_id is None else [Fetched(topic_id=topic_id, partitions=partitions)],
        forgotten_topics_data=[],
    )


async def test_a_share_session_wants_each_next_epoch(
    inproc_server: Server, raw_client: ProtocolClient
) -> None:
    topic_id = inproc_server.broker.topics.get(TOPIC).topic_id
    assert (await ask(raw_client, fetch("g", 1))).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert (await ask(raw_client, fetch("g", 0, topic_id))).error_code == ErrorCode.NONE
    assert (await ask(raw_client, fetch("g", 1))).error_code == ErrorCode.NONE
    stale = await ask(raw_client, fetch("g", 1))
    assert stale.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # Epoch 0 opens a fresh session whatever the old one had reached.
    assert (await ask(raw_client, fetch("g", 0, topic_id))).error_code == ErrorCode.NONE
    assert (await ask(raw_client, fetch("g", 1))).error_code == ErrorCode.NONE


async def test_acknowledgements_cannot_open_a_session(
    inproc_server: Server, raw_client: ProtocolClient
) -> None:
    topic_id = inproc_server.broker.topics.get(TOPIC).topic_id
    batch = Fetched.FetchPartition.AcknowledgementBatch(
        first_offset=0, last_offset=0, acknowledge_types=[1]
    )
    refused = await ask(raw_client, fetch("g", 0, topic_id, [batch]))
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    ack = ShareAcknowledgeRequest(
        version=1, group_id="g", member_id="m1", share_session_epoch=0, topics=[]
    )
    assert (await ask(raw_client, ack)).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # Acknowledging what was never delivered: the partition's own error.
    await ask(raw_client, fetch("g", 0, topic_id))
    answer = await ask(raw_client, fetch("g", 1, topic_id, [batch]))
    (partition,) = answer.responses[0].partitions
    assert partition.acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE


async def test_a_member_id_must_be_given(raw_client: ProtocolClient) -> None:
    answer = await ask(raw_client, join("g", member=""))
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    fetched = await ask(raw_client, fetch("g", 0, member=""))
    assert fetched.error_code == ErrorCode.INVALID_REQUEST


async def test_one_id_is_one_group_across_kinds(raw_client: ProtocolClient) -> None:
    assert (await ask(raw_client, join("shared"))).error_code == ErrorCode.NONE
    classic = JoinGroupRequest(
        version=5,
        group_id="shared",
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )
    assert (await ask(raw_client, classic)).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # Nor are a share group's offsets committed (ShareGroup.validateOffsetCommit), and no
    # classic group of its name appears beside it.
    committed = OffsetCommitRequest(
        version=8,
        group_id="shared",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=3, committed_metadata=""
                    )
                ],
            )
        ],
    )
    (topic,) = (await ask(raw_client, committed)).topics
    assert [p.error_code for p in topic.partitions] == [ErrorCode.GROUP_ID_NOT_FOUND]
    listed = await ask(raw_client, ListGroupsRequest(version=5, states_filter=[], types_filter=[]))
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("shared", "share")]
    described = await ask(raw_client, DescribeGroupsRequest(version=5, groups=["shared"]))
    assert [g.group_state for g in described.groups] == ["Dead"]
    share = await ask(
        raw_client,
        ShareGroupDescribeRequest(
            version=1, group_ids=["shared"], include_authorized_operations=True
        ),
    )
    (group,) = share.groups
    # Without ACLs, every operation a group has (Read, Describe, Delete, DescribeConfigs,
    # AlterConfigs), as Kafka's AuthHelper.authorizedOperations.
    assert group.authorized_operations == sum(1 << op for op in (3, 6, 8, 10, 11))
    assert (group.error_code, group.group_state, group.assignor_name) == (0, "Stable", "simple")
    consumer = await ask(
        raw_client,
        ConsumerGroupDescribeRequest(
            version=1, group_ids=["shared"], include_authorized_operations=False
        ),
    )
    assert [(g.error_code, g.error_message) for g in consumer.groups] == [
        (ErrorCode.GROUP_ID_NOT_FOUND, "Group shared is not a consumer group.")
    ]
    assert [m.member_id for m in group.members] == ["m1"]


async def test_share_version_0_turns_share_groups_off(raw_client: ProtocolClient) -> None:
    update = UpdateFeaturesRequest.FeatureUpdateKey
    off = UpdateFeaturesRequest(
        version=1,
        timeout_ms=1000,
        feature_updates=[update(feature="share.version", max_version_level=0, upgrade_type=2)],
        validate_only=False,
    )
    assert (await ask(raw_client, off)).error_code == ErrorCode.NONE
    assert (await ask(raw_client, join("g"))).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert (await ask(raw_client, fetch("g", 0))).error_code == ErrorCode.UNSUPPORTED_VERSION


async def test_a_share_group_is_deleted_once_empty(
    inproc_server: Server, raw_client: ProtocolClient
) -> None:
    topic_id = inproc_server.broker.topics.get(TOPIC).topic_id
    await ask(raw_client, join("doomed"))
    await ask(raw_client, fetch("doomed", 0, topic_id))
    shares = inproc_server.broker.shares
    assert [key for key in shares.partitions if key[0] == "doomed"] == [("doomed", topic_id, 0)]
    delete = DeleteGroupsRequest(version=2, groups_names=["doomed"])
    (result,) = (await ask(raw_client, delete)).results
    assert result.error_code == ErrorCode.NON_EMPTY_GROUP
    assert (await ask(raw_client, join("doomed", epoch=-1))).error_code == ErrorCode.NONE
    (result,) = (await ask(raw_client, delete)).results
    assert result.error_code == ErrorCode.NONE
    # Its delivery state went with it.
    assert not [key for key in shares.partitions if key[0] == "doomed"]
    described = await ask(
        raw_client,
        ShareGroupDescribeRequest(
            version=1, group_ids=["doomed"], include_authorized_operations=False
        ),
    )
    assert [g.error_code for g in described.groups] == [ErrorCode.GROUP_ID_NOT_FOUND]


def describe_offsets(group: str, topics: list[str] | None) -> Any:
    asked = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    named = (
        None
        if topics is None
        else [
            asked.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=[0, 1])
            for t in topics
        ]
    )
    return DescribeShareGroupOffsetsRequest(version=1, groups=[asked(group_id=group, topics=named)])


def starts(answer: Any) -> dict[str, list[tuple[int, int, int]]]:
    (group,) = answer.groups
    assert group.error_code == 0
    return {
        t.topic_name: [(p.partition_index, p.start_offset, p.lag) for p in t.partitions]
        for t in group.topics
    }


async def test_a_share_groups_start_offsets_are_described_altered_and_deleted(
    inproc_server: Server, raw_client: ProtocolClient
) -> None:
    topic = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    alter = AlterShareGroupOffsetsRequest(
        version=0,
        group_id="offsets",
        topics=[
            topic(
                topic_name=TOPIC,
                partitions=[
                    topic.AlterShareGroupOffsetsRequestPartition(partition_index=1, start_offset=0),
                    topic.AlterShareGroupOffsetsRequestPartition(partition_index=9, start_offset=0),
                ],
            ),
            topic(topic_name="nope", partitions=[]),
        ],
    )
    altered = await ask(raw_client, alter)
    assert altered.error_code == 0
    assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in altered.responses] == [
        (TOPIC, [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]),
        ("nope", []),
    ]
    # All the partitions it has a start in; named ones (a partition without a start: -1).
    assert starts(await ask(raw_client, describe_offsets("offsets", None))) == {TOPIC: [(1, 0, 0)]}
    assert starts(await ask(raw_client, describe_offsets("offsets", [TOPIC, "nope"]))) == {
        TOPIC: [(0, -1, -1), (1, 0, 0)],
        "nope": [(0, -1, -1), (1, -1, -1)],
    }
    # A member in the group: its offsets are not to be changed.
    assert (await ask(raw_client, join("offsets"))).error_code == ErrorCode.NONE
    refused = await ask(raw_client, alter)
    assert refused.error_code == ErrorCode.NON_EMPTY_GROUP
    await ask(raw_client, join("offsets", epoch=-1))
    named = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    delete = DeleteShareGroupOffsetsRequest(
        version=0, group_id="offsets", topics=[named(topic_name=TOPIC), named(topic_name="nope")]
    )
    deleted = await ask(raw_client, delete)
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (TOPIC, 0),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert starts(await ask(raw_client, describe_offsets("offsets", None))) == {}
    again = await ask(raw_client, delete)
    assert [t.error_message for t in again.responses] == [
        "There is no offset information to delete.",
        "This server does not host this topic-partition.",
    ]
    unknown = DeleteShareGroupOffsetsRequest(version=0, group_id="never", topics=[])
    assert (await ask(raw_client, unknown)).error_code == ErrorCode.GROUP_ID_NOT_FOUND
