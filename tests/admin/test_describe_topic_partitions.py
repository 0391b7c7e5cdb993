"""DescribeTopicPartitions (key 75, KIP-966), as Kafka's DescribeTopicPartitionsRequestHandler
and KRaftMetadataCache.describeTopicResponse answer it: a stock admin client (kafka-python's
describe_topic_partitions) over TCP paging with its cursor; v0 with the raw client: every
topic or those named, each partition as Metadata describes it, the partition limit and its
broker-side cap, the next cursor where Kafka puts it, errors for unknown and illegal names and
for a bad cursor, authorized operations, and Describe on each topic."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from authzkit import authorized_client
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeTopicPartitionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.app import Server
from minicoord.server.config import Config
from minicoord.testing.embedded import running

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
INVALID_NAME = ErrorCode.INVALID_TOPIC_EXCEPTION
INVALID = ErrorCode.INVALID_REQUEST
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
# Kafka's AclEntry.supportedOperations(TOPIC) as a bitfield: Read, Write, Create, Delete,
# Alter, Describe, DescribeConfigs, AlterConfigs.
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
DESCRIBE, READ = 1 << 8, 1 << 3
NOT_COMPUTED = -(2**31)
TOPICS = [("alpha", 3), ("beta", 2), ("gamma", 1)]

Cursor = tuple[str, int] | None


async def describe(
    client: ProtocolClient, names: list[str], limit: int = 2000, cursor: Cursor = None
) -> Any:
    request = DescribeTopicPartitionsRequest(
        version=0,
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=(
            None
            if cursor is None
            else DescribeTopicPartitionsRequest.Cursor(
                topic_name=cursor[0], partition_index=cursor[1]
            )
        ),
    )
    return await asyncio.wait_for(client.request(request, 0), 5)


def page(answer: Any) -> tuple[list[tuple[str, int, list[int]]], Cursor]:
    """[(topic, error, partition indexes)] and the next cursor of an answer."""
    topics = [
        (t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in answer.topics
    ]
    nxt = answer.next_cursor
    return topics, None if nxt is None else (nxt.topic_name, nxt.partition_index)


@pytest.fixture
async def client() -> AsyncIterator[tuple[Server, ProtocolClient]]:
    async with Server(Config(), "127.0.0.1", 0, topics=TOPICS) as server:
        raw = await ProtocolClient.connect("127.0.0.1", server.port, "dtp-test")
        try:
            yield server, raw
        finally:
            await raw.close()


async def test_a_stock_admin_client_pages_through_named_topics() -> None:
    with running(topics=TOPICS) as s:
        ids = {name: s.server.broker.topics.get(name).topic_id for name, _ in TOPICS}
        admin = KafkaAdminClient(bootstrap_servers=s.bootstrap, client_id="describe-partitions")
        pages = []
        cursor = None
        try:
            for _ in range(10):  # bounded: four pages are expected
                answer = await asyncio.to_thread(
                    admin.describe_topic_partitions,
                    ["gamma", "alpha", "missing", "beta"],
                    response_partition_limit=2,
                    cursor=cursor,
                )
                pages.append(answer)
                cursor = answer["next_cursor"]
                if cursor is None:
                    break
        finally:
            admin.close()
    walked = [
        [
            (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
            for t in p["topics"]
        ]
        for p in pages
    ]
    # Two partitions a page, by name. A limit used up exactly at a topic's end points the
    # cursor at the next name, here one that does not exist (Kafka's describeTopicResponse).
    assert walked == [
        [("alpha", 0, [0, 1])],
        [("alpha", 0, [2]), ("beta", 0, [0])],
        [("beta", 0, [1]), ("gamma", 0, [0])],
        [("missing", UNKNOWN, [])],
    ]
    assert [p["next_cursor"] for p in pages] == [
        {"topic_name": "alpha", "partition_index": 2},
        {"topic_name": "beta", "partition_index": 1},
        {"topic_name": "missing", "partition_index": 0},
        None,
    ]
    first = pages[0]["topics"][0]
    assert first["topic_id"] == ids["alpha"] and first["is_internal"] is False
    assert first["topic_authorized_operations"] == ALL_TOPIC_OPERATIONS
    assert first["partitions"][1] == {
        "error_code": 0,
        "partition_index": 1,
        "leader_id": 0,
        "leader_epoch": 0,
        "replica_nodes": [0],
        "isr_nodes": [0],
        # kafka-python turns the empty lists on the wire into None.
        "eligible_leader_replicas": None,
        "last_known_elr": None,
        "offline_replicas": [],
    }


async def test_every_topic_as_metadata_describes_it(
    client: tuple[Server, ProtocolClient],
) -> None:
    _, raw = client
    found = await raw.request(FindCoordinatorRequest(version=1, key="g", key_type=0), 1)
    assert found.error_code == 0
    answer = await describe(raw, [])
    assert page(answer) == (
        [
            ("__consumer_offsets", 0, list(range(50))),
            ("alpha", 0, [0, 1, 2]),
            ("beta", 0, [0, 1]),
            ("gamma", 0, [0]),
        ],
        None,
    )
    metadata = await raw.request(MetadataRequest(version=12, topics=None), 12)
    described = {t.name: t for t in metadata.topics}
    for t in answer.topics:
        same = described[t.name]
        assert (t.topic_id, t.is_internal) == (same.topic_id, same.is_internal)
        assert t.topic_authorized_operations == ALL_TOPIC_OPERATIONS
        for p, q in zip(t.partitions, same.partitions, strict=True):
            fields = ("partition_index", "leader_id", "leader_epoch", "replica_nodes")
            assert [getattr(p, f) for f in fields] == [getattr(q, f) for f in fields]
            assert (p.isr_nodes, p.offline_replicas) == (q.isr_nodes, q.offline_replicas)
            assert (p.error_code, p.eligible_leader_replicas, p.last_known_elr) == (0, [], [])
    assert [t.is_internal for t in answer.topics] == [True, False, False, False]
    # From a cursor: names at or after its topic, that topic from its partition.
    assert page(await describe(raw, [], cursor=("beta", 1))) == (
        [("beta", 0, [1]), ("gamma", 0, [0])],
        None,
    )
    # A cursor's topic need not exist when listing every topic.
    assert page(await describe(raw, [], cursor=("b", 5))) == (
        [("beta", 0, [0, 1]), ("gamma", 0, [0])],
        None,
    )


async def test_the_limit_is_capped_by_the_broker_and_at_least_one() -> None:
    config = Config.from_pairs({"max.request.partition.size.limit": "3"})
    async with Server(config, "127.0.0.1", 0, topics=TOPICS) as server:
        raw = await ProtocolClient.connect("127.0.0.1", server.port, "dtp-test")
        try:
            assert page(await describe(raw, [], limit=100)) == (
                [("alpha", 0, [0, 1, 2])],
                ("beta", 0),
            )
            for limit in (0, -5):
                assert page(await describe(raw, ["beta", "gamma"], limit=limit)) == (
                    [("beta", 0, [0])],
                    ("beta", 1),
                )
        finally:
            await raw.close()


async def test_unknown_and_illegal_names(client: tuple[Server, ProtocolClient]) -> None:
    _, raw = client
    names = ["nope", "bad name", "__transaction_state", "__consumer_offsets", "beta", "nope"]
    answer = await describe(raw, names)
    # Named once each, sorted; the offsets topic does not exist before its first use.
    assert page(answer) == (
        [
            ("__consumer_offsets", UNKNOWN, []),
            ("__transaction_state", UNKNOWN, []),
            ("bad name", INVALID_NAME, []),
            ("beta", 0, [0, 1]),
            ("nope", UNKNOWN, []),
        ],
        None,
    )
    zero = uuid.UUID(int=0)
    assert [(t.is_internal, t.topic_id in (None, zero)) for t in answer.topics] == [
        (True, True),
        (True, True),
        (False, True),
        (False, False),
        (False, True),
    ]
    # Unknown names take none of the limit, and still carry their operations.
    assert {t.topic_authorized_operations for t in answer.topics} == {ALL_TOPIC_OPERATIONS}
    assert page(await describe(raw, ["beta", "alpha", "a-nope"], limit=5)) == (
        [("a-nope", UNKNOWN, []), ("alpha", 0, [0, 1, 2]), ("beta", 0, [0, 1])],
        None,
    )
    # A cursor beyond a topic's partitions answers none of it and goes on.
    assert page(await describe(raw, ["alpha", "beta"], cursor=("alpha", 7))) == (
        [("alpha", 0, []), ("beta", 0, [0, 1])],
        None,
    )


async def test_a_bad_cursor_is_invalid_request_on_every_named_topic(
    client: tuple[Server, ProtocolClient],
) -> None:
    _, raw = client
    # The cursor's topic must be one named, and its partition not negative. Kafka answers
    # its error response: each name as given, the error alone.
    for names, cursor in (
        (["beta", "alpha", "beta"], ("gamma", 0)),
        (["beta", "alpha", "beta"], ("alpha", -1)),
    ):
        answer = await describe(raw, names, cursor=cursor)
        assert page(answer) == ([(n, INVALID, []) for n in names], None)
        assert {t.topic_authorized_operations for t in answer.topics} == {NOT_COMPUTED}
    # Every topic with a negative partition: the same error response, with nothing in it.
    assert page(await describe(raw, [], cursor=("alpha", -1))) == ([], None)


@pytest.fixture
async def acl_client(request: pytest.FixtureRequest) -> AsyncIterator[ProtocolClient]:
    async with authorized_client(request.param, TOPICS) as client:
        yield client


@pytest.mark.parametrize(
    "acl_client",
    [("allow User:ANONYMOUS Describe topic:alpha", "allow User:ANONYMOUS Read topic:gamma")],
    indirect=True,
)
async def test_describe_on_each_topic(acl_client: ProtocolClient) -> None:
    # Every topic: the others are left out without a word.
    answer = await describe(acl_client, [])
    assert page(answer) == ([("alpha", 0, [0, 1, 2]), ("gamma", 0, [0])], None)
    assert [t.topic_authorized_operations for t in answer.topics] == [DESCRIBE, READ | DESCRIBE]
    # Named: refused whether or not it exists, without its id, after the others.
    answer = await describe(acl_client, ["nope", "gamma", "beta", "alpha"])
    assert page(answer) == (
        [("alpha", 0, [0, 1, 2]), ("gamma", 0, [0]), ("beta", DENIED, []), ("nope", DENIED, [])],
        None,
    )
    refused = answer.topics[2:]
    assert [t.topic_id in (None, uuid.UUID(int=0)) for t in refused] == [True, True]
    assert [t.topic_authorized_operations for t in refused] == [NOT_COMPUTED] * 2
    # Refused on every page (Kafka 4.2 authorizes every name before paging), from the cursor on.
    assert page(await describe(acl_client, ["alpha", "beta"], limit=1)) == (
        [("alpha", 0, [0]), ("beta", DENIED, [])],
        ("alpha", 1),
    )
    assert page(await describe(acl_client, ["alpha", "beta"], limit=1, cursor=("alpha", 2))) == (
        [("alpha", 0, [2]), ("beta", DENIED, [])],
        None,
    )
    assert page(await describe(acl_client, ["alpha", "beta"], cursor=("beta", 0))) == (
        [("beta", DENIED, [])],
        None,
    )
