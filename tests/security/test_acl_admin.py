"""CreateAcls / DescribeAcls / DeleteAcls through stock admin clients, the errors Kafka
gives without an authorizer or without cluster Alter, and ACLs kept across a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aclkit import AUTHORIZER, Identity, admin, confluent_consumer, poll_until
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError
from minicoord.testing.embedded import EmbeddedServer, running

ANY_FILTER = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def admin_acls(principal: str) -> list[str]:
    # The ACL APIs need Alter (create, delete) and Describe on the cluster.
    return [f"allow {principal} All cluster", f"allow {principal} All topic:data"]


@pytest.fixture
def server(identity: Identity) -> Iterator[EmbeddedServer]:
    with running(
        topics=[("data", 1)], acls=admin_acls(identity.principal), **identity.server
    ) as server:
        yield server


def _group_acl(principal: str, name: str, permission: AclPermissionType) -> AclBinding:
    return AclBinding(
        ResourceType.GROUP,
        name,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        permission,
    )


def test_confluent_create_describe_delete(server: EmbeddedServer, identity: Identity) -> None:
    client = admin(server.bootstrap, identity.confluent)
    p = identity.principal
    prefixed = AclBinding(
        ResourceType.TOPIC,
        "logs-",
        ResourcePatternType.PREFIXED,
        p,
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    created = client.create_acls([_group_acl(p, "g1", AclPermissionType.ALLOW), prefixed])
    for future in created.values():
        assert future.result(10) is None
    everything = client.describe_acls(ANY_FILTER).result(10)
    assert len(everything) == 4  # the two given at start and the two created
    # MATCH: the ACLs that apply to topic "logs-app".
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "logs-app",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert client.describe_acls(match).result(10) == [prefixed]
    group_filter = AclBindingFilter(
        ResourceType.GROUP,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = client.delete_acls([group_filter])[group_filter].result(10)
    assert deleted == [_group_acl(p, "g1", AclPermissionType.ALLOW)]
    assert len(client.describe_acls(ANY_FILTER).result(10)) == 3


def test_kafka_python_create_describe_delete(server: EmbeddedServer, identity: Identity) -> None:
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, **identity.kafka_python)
    try:
        acl = ACL(
            principal=identity.principal,
            host="*",
            operation=ACLOperation.READ,
            permission_type=ACLPermissionType.DENY,
            resource_pattern=ResourcePattern(
                KpResourceType.GROUP, "kp-", ACLResourcePatternType.PREFIXED
            ),
        )
        result = client.create_acls([acl])
        assert len(result["succeeded"]) == 1 and not result["failed"]
        flt = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KpResourceType.GROUP, None, ACLResourcePatternType.ANY
            ),
        )
        acls, error = client.describe_acls(flt)
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.permission_type) for a in acls] == [
            ("kp-", ACLPermissionType.DENY)
        ]
        deleted = client.delete_acls([flt])
        ((_, matched, error),) = deleted
        assert error.errno == 0 and len(matched) == 1
        acls, _ = client.describe_acls(flt)
        assert acls == []
    finally:
        client.close()


def test_without_cluster_alter_acl_apis_are_refused(identity: Identity) -> None:
    with running(
        topics=[("data", 1)],
        acls=[f"allow {identity.principal} All topic:data"],
        **identity.server,
    ) as server:
        client = admin(server.bootstrap, identity.confluent)
        binding = _group_acl(identity.principal, "g", AclPermissionType.ALLOW)
        with pytest.raises(KafkaException) as info:
            client.create_acls([binding])[binding].result(10)
        assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # librdkafka drops DescribeAcls' top-level error (it returns no ACLs, as it does
        # against Kafka); kafka-python reports it.
        with pytest.raises(ClusterAuthorizationFailedError):
            _kafka_python_describe(server, identity)


def test_without_authorizer_acl_apis_answer_security_disabled(identity: Identity) -> None:
    with running(topics=[("data", 1)], **identity.server) as server:
        client = admin(server.bootstrap, identity.confluent)
        binding = _group_acl(identity.principal, "g", AclPermissionType.ALLOW)
        with pytest.raises(KafkaException) as info:
            client.create_acls([binding])[binding].result(10)
        assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED
        with pytest.raises(SecurityDisabledError):
            _kafka_python_describe(server, identity)


def _kafka_python_describe(server: EmbeddedServer, identity: Identity) -> object:
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, **identity.kafka_python)
    try:
        flt = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KpResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )
        return client.describe_acls(flt)
    finally:
        client.close()


def test_acls_survive_a_restart(tmp_path: Path, identity: Identity) -> None:
    p = identity.principal
    given = [*admin_acls(p), f"allow {p} Read group:blocked"]
    with running(topics=[("data", 1)], data_dir=tmp_path, acls=given, **identity.server) as server:
        client = admin(server.bootstrap, identity.confluent)
        binding = _group_acl(p, "blocked", AclPermissionType.DENY)
        assert client.create_acls([binding])[binding].result(10) is None
    # Started again on the same directory, with the authorizer on but no ACLs given.
    with running(
        {"authorizer.class.name": AUTHORIZER}, data_dir=tmp_path, **identity.server
    ) as server:
        client = admin(server.bootstrap, identity.confluent)
        assert len(client.describe_acls(ANY_FILTER).result(10)) == 4
        consumer = confluent_consumer(server.bootstrap, "blocked", identity.confluent)
        try:
            consumer.subscribe(["data"])
            event = poll_until(consumer, lambda m: m.error() is not None)
            assert event.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        finally:
            consumer.close()


def test_acl_requests_with_unknown_elements_close_the_connection_unanswered() -> None:
    # Kafka's request classes refuse an UNKNOWN (0) type, pattern type, operation or
    # permission as they parse: no answer, the connection closed, nothing created or deleted
    # (kafka-go sends 0 for every enum left unset). The super user is ANONYMOUS here.
    import asyncio

    from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
    from minicoord.clients.connection import ConnectionClosed, ProtocolClient

    creation = CreateAclsRequest.AclCreation
    good = creation(
        resource_type=2, resource_name="z", resource_pattern_type=3, principal="User:bob",
        host="*", operation=3, permission_type=3,
    )  # fmt: skip
    no_pattern = creation(
        resource_type=2, resource_name="z2", resource_pattern_type=0, principal="User:bob",
        host="*", operation=3, permission_type=3,
    )  # fmt: skip
    every = dict(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1,
    )  # fmt: skip
    requests: list[tuple[object, int]] = [
        (CreateAclsRequest(version=3, creations=[good, no_pattern]), 3),
        (DescribeAclsRequest(version=3, **(every | {"pattern_type_filter": 0})), 3),
        (
            DeleteAclsRequest(
                version=3,
                filters=[DeleteAclsRequest.DeleteAclsFilter(**(every | {"operation": 0}))],
            ),
            3,
        ),
    ]

    async def run(bootstrap: str) -> list[int]:
        host, port = bootstrap.rsplit(":", 1)
        for request, version in requests:
            async with await ProtocolClient.connect(host, int(port)) as client:
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(client.request(request, version), 5)
        async with await ProtocolClient.connect(host, int(port)) as client:
            described = await client.request(DescribeAclsRequest(version=3, **every), 3)
            return [len(r.acls) for r in described.resources]

    with running(acls=["allow User:ANONYMOUS All cluster"], super_users=["User:ANONYMOUS"]) as s:
        # Only the ACL given at start: the good creation beside the bad one was not made.
        assert asyncio.run(run(s.bootstrap)) == [1]
