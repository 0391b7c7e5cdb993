"""Producer batches for the data-path tests, built as clients build them (kafka-python's
record code), a data plane over in-memory logs driven by a manual clock, and the raw admin and
fetch requests the wire tests send."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.consumer import FetchRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from minicoord.server.config import Config
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.plane import DataPlane
from minicoord.server.topics import Topic, TopicRegistry
from minicoord.storage.log import LogManager

NOW = 1_800_000_000_000

Rec = tuple[bytes | None, bytes | None]


def batch(
    records: Sequence[Rec] = ((b"k", b"v"),),
    *,
    compression: int = 0,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    timestamp: int = NOW,
    timestamps: Sequence[int] | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
) -> bytes:
    """A v2 batch with base offset 0, as a producer sends it."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(records):
        ts = timestamps[i] if timestamps is not None else timestamp
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def records(n: int, prefix: str = "m") -> list[Rec]:
    return [(f"{prefix}{i}".encode(), f"value-{prefix}{i}".encode()) for i in range(n)]


class Plane:
    """A data plane over in-memory logs with its own clock and timers, as the broker wires it."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.now = NOW
        self.timers = TimerQueue()
        self.topics = TopicRegistry(self.config)
        self.logs = LogManager(None)
        self.data = DataPlane(self.config, self.logs, self.topics, self.timers)

    def topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Topic:
        topic, _records = self.topics.create(name, partitions, configs)
        self.data.create_logs(topic)
        return topic

    def produce(self, topic: Topic, data: bytes | None, index: int = 0, version: int = 9):  # type: ignore[no-untyped-def]
        """Append as a Produce does, then end the turn: write out and commit."""
        outcome = self.data.append(topic, index, data, self.now, version, "test")
        self.end_turn()
        return outcome

    def end_turn(self) -> list:  # type: ignore[type-arg]
        """What the broker does after each loop turn: write, commit; the woken fetches."""
        return self.data.committed(self.logs.write_out()).replies

    def advance(self, ms: int) -> list:  # type: ignore[type-arg]
        """Move the clock; the replies of timers that fired."""
        self.now += ms
        replies = []
        for callback in self.timers.pop_due(self.now):
            replies.extend(callback(self.now).replies)
        return replies


# -- raw requests ----------------------------------------------------------------------------


def new_topic(
    name: str,
    partitions: int = -1,
    assignments: Iterable[tuple[int, list[int]]] = (),
    configs: Mapping[str, str] | None = None,
    rf: int = -1,
) -> Any:
    """One topic of a CreateTopics request (-1: the broker's defaults)."""
    new = CreateTopicsRequest.CreatableTopic
    return new(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[
            new.CreatableReplicaAssignment(partition_index=p, broker_ids=b) for p, b in assignments
        ],
        configs=[new.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def create_topics(*topics: Any, validate_only: bool = False) -> Any:
    return CreateTopicsRequest(
        version=7, topics=list(topics), timeout_ms=5000, validate_only=validate_only
    )


def fetch_partition(partition: int, offset: int) -> Any:
    return FetchRequest.FetchTopic.FetchPartition(
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )


def fetch_request(version: int, topics: Iterable[tuple[str, Iterable[Any]]]) -> Any:
    """A full, non-waiting Fetch of `(topic, fetch_partition(...)s)` entries, by name."""
    return FetchRequest(
        version=version,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(topic=name, topic_id=None, partitions=list(partitions))
            for name, partitions in topics
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def describe_configs(
    resource_type: int,
    names: Iterable[str],
    keys: list[str] | None = None,
    synonyms: bool = False,
) -> Any:
    """DescribeConfigs v4 of the named resources of one type (`keys`: all when None)."""
    res = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(
        version=4,
        resources=[
            res(resource_type=resource_type, resource_name=n, configuration_keys=keys)
            for n in names
        ],
        include_synonyms=synonyms,
        include_documentation=False,
    )


def legacy_alter(resource_type: int, name: str, configs: Mapping[str, str | None]) -> Any:
    """AlterConfigs v2 (the legacy API, which replaces a resource's whole set) of one resource."""
    res = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest(
        version=2,
        resources=[
            res(
                resource_type=resource_type,
                resource_name=name,
                configs=[res.AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=False,
    )


def incremental_alter(
    resource_type: int, *resources: tuple[str, Iterable[tuple[str, int, str | None]]]
) -> Any:
    """IncrementalAlterConfigs v1 of `(resource name, [(config, operation, value)])`."""
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(
        version=1,
        resources=[
            res(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    res.AlterableConfig(name=k, config_operation=op, value=v)
                    for k, op, v in configs
                ],
            )
            for name, configs in resources
        ],
        validate_only=False,
    )


def offline_log(command: str, data_dir: Path) -> str:
    """`minicoord log COMMAND DIR`, as a user runs it on a stopped server's directory: its
    output (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "minicoord.server.cli", "log", command, str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def compact_offline(data_dir: Path) -> None:
    """`minicoord log compact DIR`."""
    offline_log("compact", data_dir)
