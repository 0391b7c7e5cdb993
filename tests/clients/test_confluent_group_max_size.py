"""`group.max.size` with stock confluent-kafka consumers, counted as Kafka counts it.

A consumer that crashes between its two JoinGroups (KIP-394: the first is answered
MEMBER_ID_REQUIRED and holds a member id for a session timeout) leaves a pending member behind.
Kafka's acceptJoiningMember does not count pending members, so a new consumer still gets in
while the group has room; minicoord once counted them, and the newcomer got
GROUP_MAX_SIZE_REACHED on every poll (fatal to the Java consumer) until the pending member's
session ran out (sweep21).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from clientkit import TOPIC, stable_with, wait_log
from clientkit import ConfluentMembers as Members
from kafka.protocol.consumer import JoinGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode

pytestmark = pytest.mark.clients

# The abandoned member's place is held this long (its session); the join phase that lets the
# newcomer in waits for it as well, as Kafka's does for pending members.
PENDING_SESSION_MS = 8_000


@pytest.fixture
def small_server(server_factory: Any) -> Any:
    return server_factory(configs={"group.max.size": 2}, topics=[(TOPIC, 6)])


@pytest.fixture
def members(small_server: Any, group_id: str) -> Iterator[Members]:
    group = Members(small_server.bootstrap, group_id)
    yield group
    group.close_all()


async def _abandoned_join(port: int, group_id: str) -> tuple[int, str]:
    """The first JoinGroup of a consumer that never sends its second."""
    client = await ProtocolClient.connect("127.0.0.1", port, "crashed-consumer")
    try:
        metadata = ConsumerProtocolSubscription(version=0, topics=[TOPIC], user_data=None)
        request = JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=PENDING_SESSION_MS,
            rebalance_timeout_ms=PENDING_SESSION_MS,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=bytes(metadata.encode())
                )
            ],
            reason=None,
        )
        response = await asyncio.wait_for(client.request(request, 5), 10)
        return response.error_code, response.member_id
    finally:
        await client.close()


def test_a_pending_member_does_not_keep_a_consumer_out_of_a_group_with_room(
    small_server: Any, members: Members, group_id: str
) -> None:
    first = members.add()
    members.wait_cover([first])
    error, pending_id = asyncio.run(_abandoned_join(small_server.port, group_id))
    assert (error, bool(pending_id)) == (ErrorCode.MEMBER_ID_REQUIRED, True)

    # One member and one pending of at most two: the newcomer is let in, never refused, and
    # the pair settles once the pending member's session runs out.
    second = members.add()
    members.wait_cover([first, second], timeout=30)
    log = wait_log(small_server, stable_with(group_id, 2), what="generation Stable with 2")
    assert "GROUP_MAX_SIZE_REACHED" not in log

    # The group is full now: a third consumer is refused, as Kafka refuses it.
    third = members.add()
    wait_log(
        small_server,
        lambda text: "GROUP_MAX_SIZE_REACHED" in text,
        what="a third consumer refused GROUP_MAX_SIZE_REACHED",
    )
    assert third.assignment == frozenset()
