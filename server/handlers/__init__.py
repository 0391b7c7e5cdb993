"""One handler module per Kafka API; this registry is what ApiVersions advertises.

An API is served and advertised because its module is listed here. A handler module (and the
kafka-python classes it decodes and encodes with) is imported the first time its API is
requested: a server that is never sent a CreateTopics never builds its classes, and none of
them is built at start. ApiVersions is answered from the version ranges written out below,
without loading every module; tests/protocol/test_lazy_registry.py proves this table equal to
each module's HANDLER, so it cannot drift from what is handled.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from typing import Any

from minicoord.server.handlers.base import Handler

# API key -> (handler module in this package, lowest version served, highest version served),
# in the order the API table of the README lists them.
APIS: dict[int, tuple[str, int, int]] = {
    18: ("api_versions", 0, 4),
    3: ("metadata", 0, 13),
    60: ("describe_cluster", 0, 2),
    75: ("describe_topic_partitions", 0, 0),
    0: ("produce", 3, 13),
    1: ("fetch", 4, 18),
    2: ("list_offsets", 1, 11),
    22: ("init_producer_id", 0, 5),
    24: ("add_partitions_to_txn", 0, 3),
    25: ("add_offsets_to_txn", 0, 4),
    26: ("end_txn", 0, 4),
    27: ("write_txn_markers", 1, 2),
    28: ("txn_offset_commit", 0, 4),
    61: ("describe_producers", 0, 0),
    65: ("describe_transactions", 0, 0),
    66: ("list_transactions", 0, 2),
    23: ("offset_for_leader_epoch", 2, 4),
    19: ("create_topics", 2, 7),
    20: ("delete_topics", 1, 6),
    37: ("create_partitions", 0, 3),
    21: ("delete_records", 0, 2),
    43: ("elect_leaders", 0, 2),
    45: ("alter_partition_reassignments", 0, 1),
    46: ("list_partition_reassignments", 0, 0),
    55: ("describe_quorum", 0, 2),
    35: ("describe_log_dirs", 1, 4),
    34: ("alter_replica_log_dirs", 1, 2),
    64: ("unregister_broker", 0, 0),
    57: ("update_features", 0, 2),
    32: ("describe_configs", 1, 4),
    33: ("alter_configs", 0, 2),
    44: ("incremental_alter_configs", 0, 1),
    74: ("list_config_resources", 0, 1),
    10: ("find_coordinator", 0, 6),
    11: ("join_group", 0, 9),
    14: ("sync_group", 0, 5),
    12: ("heartbeat", 0, 4),
    13: ("leave_group", 0, 5),
    68: ("consumer_group_heartbeat", 0, 1),
    69: ("consumer_group_describe", 0, 1),
    76: ("share_group_heartbeat", 1, 1),
    77: ("share_group_describe", 1, 1),
    78: ("share_fetch", 1, 2),
    79: ("share_acknowledge", 1, 2),
    90: ("describe_share_group_offsets", 0, 1),
    91: ("alter_share_group_offsets", 0, 0),
    92: ("delete_share_group_offsets", 0, 0),
    8: ("offset_commit", 2, 10),
    9: ("offset_fetch", 1, 10),
    15: ("describe_groups", 0, 6),
    16: ("list_groups", 0, 5),
    42: ("delete_groups", 0, 2),
    47: ("offset_delete", 0, 0),
    30: ("create_acls", 1, 3),
    29: ("describe_acls", 1, 3),
    31: ("delete_acls", 1, 3),
    17: ("sasl_handshake", 0, 1),
    36: ("sasl_authenticate", 0, 2),
    50: ("describe_user_scram_credentials", 0, 0),
    51: ("alter_user_scram_credentials", 0, 0),
    38: ("create_delegation_token", 1, 3),
    39: ("renew_delegation_token", 1, 2),
    40: ("expire_delegation_token", 1, 2),
    41: ("describe_delegation_token", 1, 3),
    48: ("describe_client_quotas", 0, 1),
    49: ("alter_client_quotas", 0, 1),
}


def load_handler(api_key: int) -> Handler:
    """The HANDLER of an API's module, importing the module if need be (KeyError if none)."""
    module = importlib.import_module(f"{__name__}.{APIS[api_key][0]}")
    handler: Handler = module.HANDLER
    return handler


# Advertised from a lower version than served, as Kafka 4 advertises Produce from v0 though it
# serves v3+ (KAFKA-18659): older librdkafka (librdkafka#4956) compresses with gzip, snappy or
# lz4 only when the broker lists Produce v0. Clients pick the highest common version; a request
# below the served range closes its connection, as in Kafka.
ADVERTISED_FROM = {0: 0}


class HandlerRegistry:
    __slots__ = ("_api_versions", "_lazy", "loaded")

    def __init__(self, handlers: Iterable[Handler] | None = None) -> None:
        """Every API of APIS, each module loaded when first asked for; or exactly `handlers`."""
        self._lazy = handlers is None
        # Filled as APIs are first requested; a lookup of a loaded one is one dict get, which
        # the connection makes itself for every request before asking `get`.
        self.loaded: dict[int, Handler] = {h.spec.key: h for h in handlers or ()}
        self._api_versions: list[Any] | None = None

    @classmethod
    def default(cls) -> HandlerRegistry:
        return cls()

    def get(self, api_key: int) -> Handler | None:
        handler = self.loaded.get(api_key)
        if handler is None and self._lazy and api_key in APIS:
            handler = self.loaded[api_key] = load_handler(api_key)
        return handler

    def versions(self) -> list[tuple[int, int, int]]:
        """(api key, min version, max version) of every API served, by key, loading none."""
        if self._lazy:
            return [(key, low, high) for key, (_, low, high) in sorted(APIS.items())]
        return sorted((h.spec.key, h.min_version, h.max_version) for h in self.loaded.values())

    def api_versions(self) -> list[Any]:
        """The ApiVersions response's entries (kafka-python objects, built once)."""
        if self._api_versions is None:
            from kafka.protocol.metadata import ApiVersionsResponse

            self._api_versions = [
                ApiVersionsResponse.ApiVersion(
                    api_key=key, min_version=ADVERTISED_FROM.get(key, low), max_version=high
                )
                for key, low, high in self.versions()
            ]
        return self._api_versions

    def __iter__(self) -> Iterator[Handler]:
        """Every handler, loading each module not loaded yet (tests, tools; never serving)."""
        if not self._lazy:
            return iter(list(self.loaded.values()))
        return iter([h for key in APIS if (h := self.get(key)) is not None])
