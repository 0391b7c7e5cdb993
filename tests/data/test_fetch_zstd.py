"""A Fetch older than v10 cannot carry zstd: on a topic whose compression.type is zstd Kafka
answers it UNSUPPORTED_COMPRESSION_TYPE per partition (KafkaApis.maybeConvertFetchedData,
by the topic's config), and serves every other topic as usual."""

from __future__ import annotations

import pytest
from datakit import create_topics, fetch_partition, fetch_request, new_topic
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running


@pytest.mark.asyncio
async def test_fetch_before_v10_is_refused_on_a_zstd_topic_only() -> None:
    with running() as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            made = await client.request(
                create_topics(
                    new_topic("squeezed", 1, configs={"compression.type": "zstd"}),
                    new_topic("plain", 1),
                ),
                7,
            )
            assert [t.error_code for t in made.topics] == [0, 0]
            for version, expected in (
                (9, [ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, ErrorCode.NONE]),
                (10, [ErrorCode.NONE, ErrorCode.NONE]),
            ):
                at_zero = [fetch_partition(0, 0)]
                fetched = await client.request(
                    fetch_request(version, [("squeezed", at_zero), ("plain", at_zero)]), version
                )
                errors = [p.error_code for t in fetched.responses for p in t.partitions]
                assert errors == expected, version
