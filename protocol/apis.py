"""API key → kafka-python's generated request/response classes and their schema versions."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from minicoord.protocol.lean_dataclass import dataclass

NEVER = 1 << 15  # above every version


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int
    # The first flexible version of each direction (KIP-482), read once: every request asks.
    request_flexible_from: int = NEVER
    response_flexible_from: int = NEVER

    def request_flexible(self, version: int) -> bool:
        return version >= self.request_flexible_from

    def response_flexible(self, version: int) -> bool:
        return version >= self.response_flexible_from


def _flexible_from(message: Any) -> int:
    # kafka-python's (first, last) flexible versions: (-1, -1) or None when none is, else
    # open-ended (32767).
    versions = message._flexible_versions
    return versions[0] if versions is not None and versions[0] >= 0 else NEVER


def _spec(request: Any, response: Any) -> ApiSpec:
    # kafka-python widens every request's minimum to 0 for its own client-side use; the
    # schema's own validVersions is what the field layouts are correct for.
    low, high = request._valid_versions
    return ApiSpec(
        request.API_KEY,
        request.name.removesuffix("Request"),
        request,
        response,
        low,
        high,
        _flexible_from(request),
        _flexible_from(response),
    )


# API key -> Kafka's name for it and the module defining its `<name>Request` and
# `<name>Response` classes. kafka-python builds each class from its JSON schema when its
# module is imported, tens of milliseconds for all of them: a spec is built the first time
# it is asked for, so a process imports only the classes of the APIs it serves.
SOURCES: dict[int, tuple[str, str]] = {
    18: ("ApiVersions", "kafka.protocol.metadata"),
    3: ("Metadata", "kafka.protocol.metadata"),
    60: ("DescribeCluster", "kafka.protocol.admin"),
    75: ("DescribeTopicPartitions", "kafka.protocol.admin"),
    10: ("FindCoordinator", "kafka.protocol.metadata"),
    19: ("CreateTopics", "kafka.protocol.admin"),
    2: ("ListOffsets", "kafka.protocol.consumer"),
    1: ("Fetch", "kafka.protocol.consumer"),
    0: ("Produce", "kafka.protocol.producer"),
    11: ("JoinGroup", "kafka.protocol.consumer"),
    14: ("SyncGroup", "kafka.protocol.consumer"),
    12: ("Heartbeat", "kafka.protocol.consumer"),
    13: ("LeaveGroup", "kafka.protocol.consumer"),
    8: ("OffsetCommit", "kafka.protocol.consumer"),
    9: ("OffsetFetch", "kafka.protocol.consumer"),
    15: ("DescribeGroups", "kafka.protocol.admin"),
    16: ("ListGroups", "kafka.protocol.admin"),
    42: ("DeleteGroups", "kafka.protocol.admin"),
    47: ("OffsetDelete", "kafka.protocol.consumer"),
    22: ("InitProducerId", "kafka.protocol.producer"),
    24: ("AddPartitionsToTxn", "kafka.protocol.producer"),
    25: ("AddOffsetsToTxn", "kafka.protocol.producer"),
    26: ("EndTxn", "kafka.protocol.producer"),
    27: ("WriteTxnMarkers", "kafka.protocol.producer"),
    28: ("TxnOffsetCommit", "kafka.protocol.producer"),
    61: ("DescribeProducers", "kafka.protocol.admin"),
    65: ("DescribeTransactions", "kafka.protocol.admin"),
    66: ("ListTransactions", "kafka.protocol.admin"),
    23: ("OffsetForLeaderEpoch", "kafka.protocol.consumer"),
    20: ("DeleteTopics", "kafka.protocol.admin"),
    37: ("CreatePartitions", "kafka.protocol.admin"),
    21: ("DeleteRecords", "kafka.protocol.admin"),
    43: ("ElectLeaders", "kafka.protocol.admin"),
    45: ("AlterPartitionReassignments", "kafka.protocol.admin"),
    46: ("ListPartitionReassignments", "kafka.protocol.admin"),
    55: ("DescribeQuorum", "kafka.protocol.admin"),
    32: ("DescribeConfigs", "kafka.protocol.admin"),
    33: ("AlterConfigs", "kafka.protocol.admin"),
    35: ("DescribeLogDirs", "kafka.protocol.admin"),
    34: ("AlterReplicaLogDirs", "kafka.protocol.admin"),
    57: ("UpdateFeatures", "kafka.protocol.admin"),
    44: ("IncrementalAlterConfigs", "kafka.protocol.admin"),
    68: ("ConsumerGroupHeartbeat", "minicoord.protocol.consumer_group_apis"),
    69: ("ConsumerGroupDescribe", "minicoord.protocol.consumer_group_apis"),
    76: ("ShareGroupHeartbeat", "minicoord.protocol.share_group_apis"),
    77: ("ShareGroupDescribe", "minicoord.protocol.share_group_apis"),
    78: ("ShareFetch", "minicoord.protocol.share_group_apis"),
    79: ("ShareAcknowledge", "minicoord.protocol.share_group_apis"),
    90: ("DescribeShareGroupOffsets", "minicoord.protocol.share_group_apis"),
    91: ("AlterShareGroupOffsets", "minicoord.protocol.share_group_apis"),
    92: ("DeleteShareGroupOffsets", "minicoord.protocol.share_group_apis"),
    30: ("CreateAcls", "kafka.protocol.admin"),
    29: ("DescribeAcls", "kafka.protocol.admin"),
    31: ("DeleteAcls", "kafka.protocol.admin"),
    17: ("SaslHandshake", "kafka.protocol.sasl"),
    36: ("SaslAuthenticate", "kafka.protocol.sasl"),
    50: ("DescribeUserScramCredentials", "kafka.protocol.admin"),
    51: ("AlterUserScramCredentials", "kafka.protocol.admin"),
    48: ("DescribeClientQuotas", "kafka.protocol.admin"),
    49: ("AlterClientQuotas", "kafka.protocol.admin"),
    74: ("ListConfigResources", "kafka.protocol.admin"),
    38: ("CreateDelegationToken", "minicoord.protocol.delegation_token_apis"),
    39: ("RenewDelegationToken", "minicoord.protocol.delegation_token_apis"),
    40: ("ExpireDelegationToken", "minicoord.protocol.delegation_token_apis"),
    41: ("DescribeDelegationToken", "minicoord.protocol.delegation_token_apis"),
    64: ("UnregisterBroker", "minicoord.protocol.unregister_broker_apis"),
}


def api_name(key: int) -> str:
    """Kafka's name of an API we serve, without loading its classes (KeyError if none)."""
    return SOURCES[key][0]


class _Specs(Mapping[int, ApiSpec]):
    """Every API's spec by key, each built on first access; keys and names need no loading."""

    def __init__(self) -> None:
        self._built: dict[int, ApiSpec] = {}

    def __getitem__(self, key: int) -> ApiSpec:
        spec = self._built.get(key)
        if spec is None:
            name, module_name = SOURCES[key]
            module = importlib.import_module(module_name)
            spec = _spec(getattr(module, f"{name}Request"), getattr(module, f"{name}Response"))
            self._built[key] = spec
        return spec

    def __contains__(self, key: object) -> bool:
        return key in SOURCES

    def __iter__(self) -> Iterator[int]:
        return iter(SOURCES)

    def __len__(self) -> int:
        return len(SOURCES)


SPECS: Mapping[int, ApiSpec] = _Specs()
