"""`group.coordinator.rebalance.protocols` without `consumer`: a Kafka 4 broker that serves
classic groups only. KafkaApis answers ConsumerGroupHeartbeat and ConsumerGroupDescribe with
UNSUPPORTED_VERSION (the bare code, as their getErrorResponse builds it) and still lists both in
ApiVersions; classic groups are served as before."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import JoinGroupRequest
from kafka.protocol.metadata import ApiVersionsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

CLASSIC_ONLY = {"group.coordinator.rebalance.protocols": "classic"}


def _heartbeat(version: int) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        version=version,
        group_id="g",
        member_id="m" * 22,
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["t"],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )


@pytest.mark.asyncio
async def test_a_classic_only_broker_refuses_the_consumer_protocol_as_kafka() -> None:
    with running(CLASSIC_ONLY, topics=[("t", 2)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            for version in (0, 1):
                answer = await client.request(_heartbeat(version), version)
                assert (answer.error_code, answer.error_message, answer.member_id) == (
                    ErrorCode.UNSUPPORTED_VERSION,
                    None,
                    None,
                )
            described = await client.request(
                ConsumerGroupDescribeRequest(
                    version=0, group_ids=["g", "h"], include_authorized_operations=False
                ),
                0,
            )
            assert [(g.group_id, g.error_code, g.error_message) for g in described.groups] == [
                ("g", ErrorCode.UNSUPPORTED_VERSION, None),
                ("h", ErrorCode.UNSUPPORTED_VERSION, None),
            ]
            # Both APIs are still listed, as Kafka lists them whatever this config says.
            versions = await client.request(
                ApiVersionsRequest(
                    version=3, client_software_name="t", client_software_version="1"
                ),
                3,
            )
            assert {68, 69} <= {k.api_key for k in versions.api_keys}
            # Classic groups as ever: the first JoinGroup of a new member asks for its id.
            join = await client.request(
                JoinGroupRequest(
                    version=5,
                    group_id="g",
                    session_timeout_ms=10000,
                    rebalance_timeout_ms=10000,
                    member_id="",
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=[("range", b"")],
                ),
                5,
            )
            assert join.error_code == ErrorCode.MEMBER_ID_REQUIRED
