"""A Fetch older than v10 cannot carry zstd: on a topic whose compression.type is zstd Kafka
answers it UNSUPPORTED_COMPRESSION_TYPE per partition (KafkaApis.maybeConvertFetchedData,
by the topic's config), and serves every other topic as usual."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running


def _topic(name: str, **configs: str) -> Any:
    new = CreateTopicsRequest.CreatableTopic
    return new(
        name=name,
        num_partitions=1,
        replication_factor=-1,
        assignments=[],
        configs=[
            new.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()
        ],
    )


def _fetch(version: int, *names: str) -> Any:
    part = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(
        version=version,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=name,
                topic_id=None,
                partitions=[
                    part(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
            for name in names
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


@pytest.mark.asyncio
async def test_fetch_before_v10_is_refused_on_a_zstd_topic_only() -> None:
    with running() as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            made = await client.request(
                CreateTopicsRequest(
                    version=7,
                    topics=[_topic("squeezed", compression_type="zstd"), _topic("plain")],
                    timeout_ms=5000,
                    validate_only=False,
                ),
                7,
            )
            assert [t.error_code for t in made.topics] == [0, 0]
            for version, expected in (
                (9, [ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, ErrorCode.NONE]),
                (10, [ErrorCode.NONE, ErrorCode.NONE]),
            ):
                fetched = await client.request(_fetch(version, "squeezed", "plain"), version)
                errors = [p.error_code for t in fetched.responses for p in t.partitions]
                assert errors == expected, version
