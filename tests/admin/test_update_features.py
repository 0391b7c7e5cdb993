"""UpdateFeatures (key 57) through a stock admin client (kafka-python's update_features and
describe_features), as Kafka 4's controller answers it: group.version down to 0 turns the
consumer protocol off (ConsumerGroupHeartbeat UNSUPPORTED_VERSION) and back up to 1 on, kept
across a restart; refusals in FeatureControlManager's words, all updates or none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.consumer_group_apis import ConsumerGroupHeartbeatRequest
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import EmbeddedServer, running

FAILED = "The update failed for all features since the following feature had an error: "


def _heartbeat_error(server: EmbeddedServer) -> int:
    """A new consumer-protocol member's first ConsumerGroupHeartbeat: its error code."""

    async def ask() -> Any:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            request = ConsumerGroupHeartbeatRequest(
                version=0,
                group_id="features-g",
                member_id="",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=["t"],
                server_assignor=None,
                topic_partitions=[],
            )
            return await asyncio.wait_for(client.request(request, 0), 5)

    return int(asyncio.run(ask()).error_code)


def _group_version(admin: KafkaAdminClient) -> tuple[int, int] | None:
    return admin.describe_features().get("group.version", {}).get("finalized")


def test_group_version_turns_the_consumer_protocol_off_and_on(tmp_path: Path) -> None:
    with running(data_dir=tmp_path, topics=[("t", 1)]) as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            features = admin.describe_features()
            assert features["metadata.version"]["finalized"] == (25, 25)
            # The epoch is the metadata log's end: past the topic made at start.
            epoch = features["group.version"].pop("finalized_epoch")
            assert features["group.version"] == {"supported": (0, 1), "finalized": (1, 1)}
            assert epoch > 0
            assert _heartbeat_error(server) == ErrorCode.NONE
            # Checked, not made.
            down = {"group.version": ("SAFE_DOWNGRADE", 0)}
            assert admin.update_features(down, validate_only=True) == {"group.version": "OK"}
            assert _group_version(admin) == (1, 1)
            assert admin.update_features(down) == {"group.version": "OK"}
            # Level 0: no longer finalized, and the consumer protocol is off, as on Kafka.
            assert _group_version(admin) is None
            # A new epoch, so clients that compare epochs take the change.
            assert admin.describe_features()["metadata.version"]["finalized_epoch"] > epoch
            assert _heartbeat_error(server) == ErrorCode.UNSUPPORTED_VERSION
        finally:
            admin.close()
    with running(data_dir=tmp_path) as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            assert _group_version(admin) is None  # kept in the metadata log
            assert _heartbeat_error(server) == ErrorCode.UNSUPPORTED_VERSION
            assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}
            assert _group_version(admin) == (1, 1)
            assert _heartbeat_error(server) == ErrorCode.NONE
        finally:
            admin.close()


@pytest.mark.parametrize(
    ("updates", "reason"),
    [
        (
            {"group.version": 0},
            "Invalid update version 0 for feature group.version. Can't downgrade the version "
            "of this feature without setting the upgrade type to either safe or unsafe "
            "downgrade.",
        ),
        (
            {"metadata.version": 26},
            "Invalid update version 26 for feature metadata.version. Local controller 0 only "
            "supports versions 7-25",
        ),
        (
            {"transaction.version": 2},
            "Invalid update version 2 for feature transaction.version. Local controller 0 "
            "does not support this feature.",
        ),
        (
            {"metadata.version": ("SAFE_DOWNGRADE", 24)},
            "Invalid metadata.version 24. Refusing to perform the requested downgrade because "
            "it might delete metadata information.",
        ),
        (
            # One wrong update refuses the others with it.
            {"group.version": ("SAFE_DOWNGRADE", 0), "metadata.version": ("UPGRADE", 30)},
            "Invalid update version 30 for feature metadata.version. Local controller 0 only "
            "supports versions 7-25",
        ),
    ],
)
def test_refusals_are_kafkas_and_change_nothing(updates: dict[str, Any], reason: str) -> None:
    with running() as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            with pytest.raises(InvalidUpdateVersionError) as refused:
                admin.update_features(updates)
            assert FAILED + reason in str(refused.value)
            assert _group_version(admin) == (1, 1)
        finally:
            admin.close()


def test_the_first_change_of_a_fresh_server_moves_the_epoch() -> None:
    # The epoch is what clients compare to take new levels: the change written first of all
    # (at metadata offset 0) must move it above the initial levels' 0 too.
    with running() as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            assert admin.describe_features()["group.version"]["finalized_epoch"] == 0
            admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)})
            assert admin.describe_features()["metadata.version"]["finalized_epoch"] == 1
        finally:
            admin.close()


def test_kraft_version_is_supported_to_1_and_moves_as_any_feature() -> None:
    # Kafka 4.0 lists kraft.version 0-1 (BrokerFeatures.defaultSupportedFeatures); here it is
    # at 0, a static quorum, until UpdateFeatures moves it.
    with running() as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            assert admin.describe_features()["kraft.version"] == {"supported": (0, 1)}
            admin.update_features({"kraft.version": 1})
            assert admin.describe_features()["kraft.version"]["finalized"] == (1, 1)
            with pytest.raises(InvalidUpdateVersionError) as refused:
                admin.update_features({"kraft.version": 2})
            assert (
                FAILED + "Invalid update version 2 for feature kraft.version. Local controller 0 "
                "only supports versions 0-1"
            ) in str(refused.value)
        finally:
            admin.close()


def test_the_epoch_moves_with_every_metadata_change_as_kafkas() -> None:
    # Kafka's epoch is its metadata image's latest offset: a topic made moves it too.
    from kafka.admin import NewTopic

    with running() as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            before = admin.describe_features()["metadata.version"]["finalized_epoch"]
            admin.create_topics([NewTopic("epoch-mover", 1, 1)])
            after = admin.describe_features()["metadata.version"]["finalized_epoch"]
            assert after > before
            assert admin.describe_features()["group.version"]["finalized"] == (1, 1)
        finally:
            admin.close()
