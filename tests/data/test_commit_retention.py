"""OffsetCommit v2-4's retention time over the wire, with a data dir: a commit that names one
expires by it (Kafka's OffsetMetadataManager keeps now + retention_time_ms), across a
restart; -1, what clients send by default, leaves the offset to offsets.retention.minutes."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.protocol.consumer import OffsetCommitRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.testing.embedded import running

Topic = OffsetCommitRequest.OffsetCommitRequestTopic
Partition = Topic.OffsetCommitRequestPartition
HOUR = 3_600_000


async def commit(server: object, version: int, partition: int, retention: int) -> int:
    host, port = server.bootstrap.rsplit(":", 1)  # type: ignore[attr-defined]
    async with await ProtocolClient.connect(host, int(port)) as client:
        part = Partition(
            partition_index=partition,
            committed_offset=10 + partition,
            committed_leader_epoch=-1,
            commit_timestamp=-1,
            committed_metadata="",
        )
        answer = await client.request(
            OffsetCommitRequest(
                version=version,
                group_id="sarama-like",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                retention_time_ms=retention,
                topics=[Topic(name="t", topic_id=None, partitions=[part])],
            ),
            version,
        )
        return answer.topics[0].partitions[0].error_code


@pytest.mark.asyncio
async def test_a_commits_retention_time_is_its_expiry_across_a_restart(tmp_path: Path) -> None:
    def expiries(server: object) -> dict[int, object]:
        coordinator = server.server.broker.coordinator  # type: ignore[attr-defined]
        return server.call(  # type: ignore[attr-defined]
            lambda: {
                tp[1]: (
                    o.offset,
                    o.expire_timestamp is not None and o.expire_timestamp - o.commit_timestamp,
                )
                for tp, o in coordinator.offsets.all_for("sarama-like").items()
            }
        )

    with running(topics=[("t", 3)], data_dir=tmp_path) as server:
        assert await commit(server, 2, 0, HOUR) == 0
        assert await commit(server, 4, 1, 5_000) == 0
        assert await commit(server, 4, 2, -1) == 0
        before = expiries(server)
    assert before == {0: (10, HOUR), 1: (11, 5_000), 2: (12, False)}
    with running(topics=[("t", 3)], data_dir=tmp_path) as server:
        assert expiries(server) == before
