"""A data directory whose topics came and went by the hundred (a CI job's per-run topics) gets
its cluster metadata log compacted at the next start: the later starts read a few records, and
everything the admin APIs left (topics, their configs, ACLs, SCRAM users, group configs, client
quotas) is as it was, through stock clients (raw requests for the quotas, which
confluent-kafka's admin does not reach), restart after restart, SIGKILL included."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from durakit import Node, client_quotas, set_client_quota
from minicoord.storage.log import log_dir

pytestmark = pytest.mark.timeout(120)

COMPACTED = "compacted the cluster metadata log"
CYCLES = 150


def _admin(node: Node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def _wait(futures: dict[Any, Any]) -> None:
    for future in futures.values():
        future.result(15)


def _state(node: Node) -> dict[str, Any]:
    admin = _admin(node)
    topics = sorted(
        (name, len(meta.partitions))
        for name, meta in admin.list_topics(timeout=10).topics.items()
        if not name.startswith("__")
    )
    resource = ConfigResource(ResourceType.TOPIC, "kept")
    configs = admin.describe_configs([resource])[resource].result(10)
    group = ConfigResource(ResourceType.GROUP, "app")
    group_configs = admin.describe_configs([group])[group].result(10)
    acls = admin.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ).result(10)  # fmt: skip
    users = admin.describe_user_scram_credentials(["alice"])["alice"].result(10)
    return {
        "topics": topics,
        "retention.ms": configs["retention.ms"].value,
        "group session": group_configs["consumer.session.timeout.ms"].value,
        "acls": sorted(str(a) for a in acls),
        "alice": sorted((c.mechanism, c.iterations) for c in users.scram_credential_infos),
        "quotas": asyncio.run(client_quotas(node.port)),
    }


def test_churned_topics_are_compacted_away_and_the_rest_survives(node_factory: Any) -> None:
    # ACLs are described only with an authorizer; the clients here are User:ANONYMOUS.
    node = node_factory(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        }
    )
    node.start()
    admin = _admin(node)
    for first in range(0, CYCLES, 50):
        names = [f"run-{i}" for i in range(first, first + 50)]
        _wait(admin.create_topics([NewTopic(n, 2) for n in names], operation_timeout=10))
        _wait(admin.delete_topics(names, operation_timeout=10))
    _wait(admin.create_topics([NewTopic("kept", 3, config={"retention.ms": "60000"})]))
    group = ConfigResource(ResourceType.GROUP, "app")
    group.add_incremental_config(
        ConfigEntry("consumer.session.timeout.ms", "20000",
                    incremental_operation=AlterConfigOpType.SET)
    )  # fmt: skip
    _wait(admin.incremental_alter_configs([group]))
    acl = AclBinding(ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    _wait({0: admin.create_acls([acl])[acl]})
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"secret"
    )
    _wait(admin.alter_user_scram_credentials([upsert]))
    for entity, key, value in (
        ({"user": "alice"}, "producer_byte_rate", 1024.0),
        ({"user": None}, "request_percentage", 25.0),
        ({"user": "alice", "client-id": "app"}, "consumer_byte_rate", 4096.0),
    ):
        assert asyncio.run(set_client_quota(node.port, entity, key, value)) == [0]
    expected = _state(node)
    assert expected["topics"] == [("kept", 3)] and expected["acls"], expected
    assert len(expected["quotas"]) == 3, expected
    node.stop()

    node.start()  # reads the churn back once, then compacts
    node.wait_log(COMPACTED)
    assert _state(node) == expected
    metadata = log_dir(Path(node.data_dir), "__cluster_metadata", 0)
    assert len(list(metadata.glob("*.log"))) == 1
    node.kill()  # SIGKILL: nothing of the compaction is left to a clean shutdown

    node.start()
    assert _state(node) == expected
    # The next start has nothing dead to drop: it leaves the log alone.
    assert COMPACTED not in node.log, node.log
    admin = _admin(node)
    _wait(admin.create_topics([NewTopic("after", 1)]))
    node.stop()
    node.start()
    assert ("after", 1) in _state(node)["topics"]
