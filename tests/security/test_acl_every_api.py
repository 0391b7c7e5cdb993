"""Every API against an authorizer, with the samples of tests/protocol/test_wire.py: with no
ACLs each answers the authorization error Kafka gives for it, and a super user gets exactly
the answers of a server without ACLs."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.app import Server
from minicoord.server.config import Config
from minicoord.server.security.specs import parse_acl

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
WIRE_ACL = parse_acl("allow User:ANONYMOUS Read group:*")

# The error each API answers (somewhere in its response) when nothing is allowed.
EXPECTED: dict[int, ErrorCode | None] = {
    18: None,  # ApiVersions: never authorized
    3: TOPIC_DENIED,
    60: None,  # DescribeCluster: never refused; the cluster's operations need Describe
    75: TOPIC_DENIED,  # DescribeTopicPartitions: Describe on each topic
    10: GROUP_DENIED,
    19: TOPIC_DENIED,
    2: TOPIC_DENIED,
    1: TOPIC_DENIED,
    0: TOPIC_DENIED,
    11: GROUP_DENIED,
    14: GROUP_DENIED,
    12: GROUP_DENIED,
    13: GROUP_DENIED,
    8: GROUP_DENIED,
    9: GROUP_DENIED,
    15: GROUP_DENIED,
    16: None,  # ListGroups: filtered, not refused
    42: GROUP_DENIED,
    47: GROUP_DENIED,
    22: CLUSTER_DENIED,  # an idempotent producer without IdempotentWrite or any Write
    61: TOPIC_DENIED,  # DescribeProducers: Read on the topic
    65: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,  # Describe on the transactional id
    66: None,  # ListTransactions: filtered by Describe on each id, not refused
    # The transaction APIs: Write on the transactional id, before anything else.
    24: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    25: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    26: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    28: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    27: CLUSTER_DENIED,  # WriteTxnMarkers: ClusterAction on the cluster
    23: TOPIC_DENIED,
    20: TOPIC_DENIED,
    37: TOPIC_DENIED,
    21: TOPIC_DENIED,
    43: CLUSTER_DENIED,  # ElectLeaders: Alter on the cluster
    45: CLUSTER_DENIED,  # AlterPartitionReassignments: Alter on the cluster
    46: CLUSTER_DENIED,  # ListPartitionReassignments: Describe on the cluster
    55: CLUSTER_DENIED,  # DescribeQuorum: Describe on the cluster
    32: TOPIC_DENIED,
    33: TOPIC_DENIED,
    35: CLUSTER_DENIED,
    57: CLUSTER_DENIED,  # UpdateFeatures: Alter on the cluster
    34: CLUSTER_DENIED,  # AlterReplicaLogDirs: Alter on the cluster
    64: CLUSTER_DENIED,  # UnregisterBroker: Alter on the cluster
    44: TOPIC_DENIED,
    74: CLUSTER_DENIED,  # ListConfigResources: DescribeConfigs on the cluster
    68: GROUP_DENIED,
    69: GROUP_DENIED,
    76: GROUP_DENIED,  # ShareGroupHeartbeat: Read on the group
    77: GROUP_DENIED,  # ShareGroupDescribe: Describe on the group
    78: GROUP_DENIED,  # ShareFetch: Read on the group
    79: GROUP_DENIED,  # ShareAcknowledge: Read on the group
    90: GROUP_DENIED,  # DescribeShareGroupOffsets: Describe on the group
    91: GROUP_DENIED,  # AlterShareGroupOffsets: Read on the group
    92: GROUP_DENIED,  # DeleteShareGroupOffsets: Delete on the group
    30: CLUSTER_DENIED,
    29: CLUSTER_DENIED,
    31: CLUSTER_DENIED,
    50: CLUSTER_DENIED,  # SCRAM credentials: Describe on the cluster
    51: CLUSTER_DENIED,  # ... and Alter to change them
    48: CLUSTER_DENIED,  # client quotas: DescribeConfigs on the cluster
    49: CLUSTER_DENIED,  # ... and AlterConfigs to change them
    # Delegation tokens: refused on a PLAINTEXT listener before any authorization.
    38: ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
    39: ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
    40: ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
    41: ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
    # The SASL APIs are not authorized; on this PLAINTEXT listener they answer as without ACLs.
    17: ErrorCode.ILLEGAL_SASL_STATE,
    36: ErrorCode.ILLEGAL_SASL_STATE,
}


def _wire_module() -> Any:
    path = Path(__file__).resolve().parents[1] / "protocol" / "test_wire.py"
    spec = importlib.util.spec_from_file_location("acl_wire_samples", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WIRE = _wire_module()
_REGISTRY = WIRE.HandlerRegistry.default()
CASES = [(key, _REGISTRY.get(key).max_version) for key in EXPECTED] + [
    (key, _REGISTRY.get(key).min_version) for key in (3, 8, 9, 15, 1, 0)
]


def test_every_served_api_has_its_refusal_written_down() -> None:
    # A handler added without an authorization check must not go unnoticed here.
    assert {h.spec.key for h in _REGISTRY} == set(EXPECTED)


def error_codes(obj: Any) -> set[int]:
    """Every error code in a response, however deep (AddPartitionsToTxn names its
    partitions' `partition_error_code`)."""
    found: set[int] = set()
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found |= error_codes(item)
        return found
    fields = getattr(obj, "fields", None) or getattr(type(obj), "_fields", None)
    names = [f.name if hasattr(f, "name") else f for f in fields or ()]
    if not names and hasattr(obj, "__dict__"):
        names = list(vars(obj))
    for name in names:
        value = getattr(obj, name, None)
        if name in ("error_code", "partition_error_code") and isinstance(value, int):
            found.add(value)
        elif isinstance(value, (list, tuple)) or hasattr(value, "__dict__"):
            found |= error_codes(value)
    return found


async def _serve(**kwargs: Any) -> Server:
    configs = {"authorizer.class.name": AUTHORIZER, **kwargs.pop("configs", {})}
    return Server(Config.from_pairs(configs), "127.0.0.1", 0, topics=[(WIRE.TOPIC, 6)], **kwargs)


@pytest.fixture
async def denied_client() -> AsyncIterator[tuple[Server, ProtocolClient]]:
    async with await _serve() as server:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        yield server, client
        await client.close()


@pytest.fixture
async def super_client() -> AsyncIterator[tuple[Server, ProtocolClient]]:
    async with await _serve(configs={"super.users": "User:ANONYMOUS"}) as server:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        yield server, client
        await client.close()


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{SPECS[k].name}-v{v}" for k, v in CASES])
async def test_nothing_allowed(
    denied_client: tuple[Server, ProtocolClient], key: int, version: int
) -> None:
    server, client = denied_client
    topic_id = server.broker.topics.get(WIRE.TOPIC).topic_id
    request, _ = WIRE._sample(key, version, topic_id)
    response = await asyncio.wait_for(client.request(request, version), 5)
    codes = error_codes(response)
    expected = EXPECTED[key]
    if (key, version) == (9, 1):
        # OffsetFetch v1 has no group-level error: Kafka answers a refused group with no
        # topics at all, and so no error to see.
        expected = None
    if expected is None:
        assert codes <= {0}, response
    else:
        assert expected in codes, response
        assert codes <= {0, expected}, response


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{SPECS[k].name}-v{v}" for k, v in CASES])
async def test_super_user_is_answered_as_without_acls(
    super_client: tuple[Server, ProtocolClient], key: int, version: int
) -> None:
    server, client = super_client
    topic_id = server.broker.topics.get(WIRE.TOPIC).topic_id
    request, check = WIRE._sample(key, version, topic_id)
    if key in (29, 30, 31):
        return  # with an authorizer the ACL APIs work rather than answer SECURITY_DISABLED
    response = await asyncio.wait_for(client.request(request, version), 5)
    assert check(response), response


async def test_consumer_group_topics_need_describe() -> None:
    # Read on every group, nothing on the topic: a KIP-848 member subscribing to it, and a
    # describe of its group once a member (as a super user) joined, are refused (Kafka 4.0).
    async with await _serve(acls=["allow User:ANONYMOUS Read group:*"]) as server:
        topic_id = server.broker.topics.get(WIRE.TOPIC).topic_id
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        try:
            request, _ = WIRE._sample(68, 1, topic_id)
            response = await asyncio.wait_for(client.request(request, 1), 5)
            assert response.error_code == TOPIC_DENIED, response
            assert response.error_message is None  # Kafka sends the bare code
            server.broker.acls.super_users = frozenset({"User:ANONYMOUS"})
            server.broker.acls.remove(next(iter(dict(server.broker.acls.items()))))
            response = await asyncio.wait_for(client.request(request, 1), 5)
            assert response.error_code == 0, response
            server.broker.acls.super_users = frozenset()
            server.broker.acls.add(WIRE_ACL)
            described, _ = WIRE._sample(69, 1, topic_id)
            described.group_ids = [request.group_id]
            response = await asyncio.wait_for(client.request(described, 1), 5)
            assert [g.error_code for g in response.groups] == [TOPIC_DENIED], response
        finally:
            await client.close()


async def test_consumer_group_describe_checks_assigned_topics_not_subscribed_ones() -> None:
    # A member subscribes to the wire topic and to "future", which does not exist, so only
    # the wire topic is assigned. One who may describe the group and the wire topic, not
    # "future", sees the group: Kafka's handleConsumerGroupDescribe checks the current and
    # target assignments' topics only.
    acls = [
        "allow User:ANONYMOUS Read group:*",
        f"allow User:ANONYMOUS Describe topic:{WIRE.TOPIC}",
        # The heartbeat needs Describe on every subscribed name; dropped once joined.
        "allow User:ANONYMOUS Describe topic:future",
    ]
    async with await _serve(acls=acls) as server:
        topic_id = server.broker.topics.get(WIRE.TOPIC).topic_id
        ids = {acl: acl_id for acl_id, acl in server.broker.acls.items()}
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        try:
            joined, _ = WIRE._sample(68, 1, topic_id)
            joined.subscribed_topic_names = [WIRE.TOPIC, "future"]
            response = await asyncio.wait_for(client.request(joined, 1), 5)
            assert response.error_code == 0, response
            server.broker.acls.remove(ids[parse_acl(acls[2])])
            described, _ = WIRE._sample(69, 1, topic_id)
            described.group_ids = [joined.group_id]
            response = await asyncio.wait_for(client.request(described, 1), 5)
            (group,) = response.groups
            assert group.error_code == 0, group
            (member,) = group.members
            assert sorted(member.subscribed_topic_names) == ["future", WIRE.TOPIC]
            # The assigned topic still needs Describe.
            server.broker.acls.remove(ids[parse_acl(acls[1])])
            response = await asyncio.wait_for(client.request(described, 1), 5)
            assert [g.error_code for g in response.groups] == [TOPIC_DENIED], response
        finally:
            await client.close()


async def test_create_topics_shows_a_topic_only_to_who_may_describe_its_configs() -> None:
    # Kafka's ReplicationControlManager.createTopic: without DescribeConfigs on the created
    # topic, no partition count, replication factor or configs (-1, -1, null) and
    # TOPIC_AUTHORIZATION_FAILED for its configs; a topic not created has no config error.
    from kafka.protocol.admin import CreateTopicsRequest

    def new_topic(name: str) -> Any:
        return CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=3, replication_factor=-1, assignments=[], configs=[]
        )

    acls = [
        "allow User:ANONYMOUS Create topic:mk prefixed",
        "allow User:ANONYMOUS DescribeConfigs topic:mk.dc prefixed",
    ]
    async with await _serve(acls=acls) as server:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        try:
            topics = [new_topic(n) for n in ("mk.plain", "mk.dc1", "zz")]
            request = CreateTopicsRequest(
                version=7, topics=topics, timeout_ms=5000, validate_only=False
            )
            answer = await asyncio.wait_for(client.request(request, 7), 5)
            got = {
                t.name: (t.error_code, t.num_partitions, t.replication_factor,
                         t.configs is None, t.topic_config_error_code)
                for t in answer.topics
            }  # fmt: skip
            assert got == {
                "mk.plain": (0, -1, -1, True, TOPIC_DENIED),
                "mk.dc1": (0, 3, 1, False, 0),
                "zz": (TOPIC_DENIED, -1, -1, True, 0),
            }
        finally:
            await client.close()
