"""OffsetFetch with a group-level error answers as Kafka answers it: the group's error and no
topics from v2 on (v8+ in the group's entry), each partition carrying it only at v1, which
has no group-level field (OffsetFetchRequest.getErrorResponse)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.consumer_group_apis import ConsumerGroupHeartbeatRequest
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

TOPIC = "fetched"


def _v9(group: str, member: str, epoch: int) -> Any:
    req = OffsetFetchRequest
    return req(
        version=9,
        groups=[
            req.OffsetFetchRequestGroup(
                group_id=group,
                member_id=member,
                member_epoch=epoch,
                topics=[
                    req.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=TOPIC, partition_indexes=[0, 1]
                    )
                ],
            )
        ],
        require_stable=False,
    )


def _old(version: int, group: str) -> Any:
    req = OffsetFetchRequest
    topics = [req.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]
    if version >= 7:
        return req(version=version, group_id=group, topics=topics, require_stable=False)
    return req(version=version, group_id=group, topics=topics)


@pytest.mark.asyncio
async def test_a_group_error_is_the_groups_alone() -> None:
    with running(topics=[(TOPIC, 2)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            member = str(uuid.uuid4())
            joined = await client.request(
                ConsumerGroupHeartbeatRequest(
                    version=1,
                    group_id="g",
                    member_id=member,
                    member_epoch=0,
                    instance_id=None,
                    rack_id=None,
                    rebalance_timeout_ms=30000,
                    subscribed_topic_names=[TOPIC],
                    subscribed_topic_regex=None,
                    server_assignor=None,
                    topic_partitions=[],
                ),
                1,
            )
            assert joined.error_code == 0 and joined.member_epoch >= 1
            ok = (await client.request(_v9("g", member, joined.member_epoch), 9)).groups[0]
            assert ok.error_code == 0 and [len(t.partitions) for t in ok.topics] == [2]
            for who, epoch, error in [
                (member, joined.member_epoch + 5, ErrorCode.STALE_MEMBER_EPOCH),
                ("nobody", 1, ErrorCode.UNKNOWN_MEMBER_ID),
            ]:
                (group,) = (await client.request(_v9("g", who, epoch), 9)).groups
                assert (group.error_code, group.topics) == (error, [])
            # A coordinator that moved: the top-level error alone at v2-7, per partition at v1.
            server.control.coordinator_moved(60_000, "g")
            for version in (2, 7):
                answer = await client.request(_old(version, "g"), version)
                assert (answer.error_code, answer.topics) == (ErrorCode.NOT_COORDINATOR, [])
            answer = await client.request(_old(1, "g"), 1)
            errors = [p.error_code for t in answer.topics for p in t.partitions]
            assert errors == [ErrorCode.NOT_COORDINATOR] * 2
