"""What every simulated group member shares, whichever group protocol it speaks: its
connection and recorder, timed requests, the coordinator lookup, topic metadata, offset
commits and fetches, and its heartbeat task. The classic member is in member.py, the KIP-848
one in consumer_member.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.clients.timings import Recorder
from minicoord.protocol.errors import ErrorCode

# The newest version of each API that still names topics by name (OffsetCommit v10 and
# OffsetFetch v10 use topic ids) and that minicoord and Kafka 3.x/4.x brokers both serve.
VERSIONS = {
    "FindCoordinator": 4,
    # v12 also gives topic ids, which the consumer protocol names partitions by; a topic
    # asked for by name carries the zero UUID there.
    "Metadata": 12,
    "JoinGroup": 9,
    "SyncGroup": 5,
    "Heartbeat": 4,
    "LeaveGroup": 5,
    "OffsetCommit": 9,
    "OffsetFetch": 8,
    "CreateTopics": 7,
    "ConsumerGroupHeartbeat": 1,
    "ConsumerGroupDescribe": 1,
}
ZERO_UUID = uuid.UUID(int=0)

# Errors after which a member simply retries the same step after a short pause.
RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}
RETRY_BACKOFF_S = 0.05
MAX_JOIN_ATTEMPTS = 100

Offsets = Mapping[tuple[str, int], int]


class MemberError(Exception):
    """The group refused this member for good (fenced, group full, too many retries)."""

    def __init__(self, message: str, error: int = -1) -> None:
        super().__init__(message)
        self.error = error


class MemberBase:
    """The parts of a member both protocols share; subclasses join, heartbeat and leave."""

    def __init__(
        self,
        conn: ProtocolClient,
        group_id: str,
        topics: Sequence[str],
        *,
        index: int,
        group_instance_id: str | None,
        recorder: Recorder | None,
        partitions: dict[str, int] | None,
        topic_ids: dict[uuid.UUID, str] | None = None,
    ) -> None:
        self.conn = conn
        self.group_id = group_id
        self.topics = list(topics)
        self.index = index
        self.group_instance_id = group_instance_id
        self.recorder = recorder if recorder is not None else Recorder()
        # Partition counts (and topic ids) learnt from Metadata; shared between the members
        # of one process so that a thousand members ask once, not a thousand times.
        self.partitions = partitions if partitions is not None else {}
        self.topic_ids = topic_ids if topic_ids is not None else {}
        self.member_id = ""
        # Classic: the generation; consumer protocol: the member epoch. OffsetCommit carries it.
        self.generation = -1
        self.assignment: dict[str, list[int]] = {}
        self.group_size = 0  # members in the generation we hold an assignment for (0: unknown)
        self.rounds = 0  # assignments taken (classic: completed join+sync rounds)
        self.first_join_at = 0.0  # perf_counter of the first join request sent
        self.assigned_at = 0.0  # perf_counter of the latest assignment received
        self.errors: dict[int, int] = {}
        # Called after every assignment received (a load generator counts settled members).
        self.on_assigned: Callable[[Any], None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None

    async def heartbeat_loop(self) -> None:
        raise NotImplementedError

    def start_heartbeats(self) -> asyncio.Task[None]:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.get_running_loop().create_task(self.heartbeat_loop())
        return self._heartbeat_task

    async def stop_heartbeats(self) -> None:
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, MemberError, ConnectionError):
                await task

    # -- requests, timed -------------------------------------------------------------------

    async def _call(self, api: str, request: Any, error_of: Callable[[Any], int]) -> Any:
        t0 = time.perf_counter()
        try:
            response = await self.conn.request(request, VERSIONS[api])
        except ConnectionError:
            self.recorder.request(api, self.group_id, self.index, t0, time.perf_counter(), -1)
            raise
        error = error_of(response)
        self.recorder.request(api, self.group_id, self.index, t0, time.perf_counter(), error)
        if error:
            self.errors[error] = self.errors.get(error, 0) + 1
        return response

    async def find_coordinator(self) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator."""
        request = FindCoordinatorRequest(
            key=self.group_id, key_type=0, coordinator_keys=[self.group_id]
        )
        for _ in range(MAX_JOIN_ATTEMPTS):
            response = await self._call(
                "FindCoordinator", request, lambda r: r.coordinators[0].error_code
            )
            c = response.coordinators[0]
            if c.error_code == 0:
                return c.node_id, c.host, c.port
            if c.error_code not in RETRIABLE:
                raise MemberError(
                    f"FindCoordinator failed: {ErrorCode(c.error_code).name}", c.error_code
                )
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise MemberError("no coordinator found")

    async def fetch_metadata(self) -> dict[str, int]:
        """Partition counts of our topics (auto-created by the broker if it does that)."""
        request = MetadataRequest(
            topics=[
                MetadataRequest.MetadataRequestTopic(name=t, topic_id=ZERO_UUID)
                for t in self.topics
            ],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        response = await self._call(
            "Metadata", request, lambda r: next((t.error_code for t in r.topics if t.error_code), 0)
        )
        for topic in response.topics:
            if topic.error_code == 0:
                self.partitions[topic.name] = len(topic.partitions)
                if topic.topic_id is not None and topic.topic_id != ZERO_UUID:
                    self.topic_ids[topic.topic_id] = topic.name
        return self.partitions

    # -- offsets ---------------------------------------------------------------------------

    async def commit(self, offsets: Offsets, metadata: str = "") -> dict[tuple[str, int], int]:
        """Commit offsets as this member of the current generation; error code per partition."""
        by_topic: dict[str, list[Any]] = {}
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        Partition = Topic.OffsetCommitRequestPartition
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                Partition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = await self._call("OffsetCommit", request, _first_partition_error)
        return {
            (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
        }

    async def fetch_offsets(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """Committed offset of each partition (-1: none)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        Group = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest(
            groups=[
                Group(
                    group_id=self.group_id,
                    member_id=None,
                    member_epoch=-1,
                    topics=[
                        Group.OffsetFetchRequestTopics(name=t, topic_id=None, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=False,
        )
        response = await self._call(
            "OffsetFetch",
            request,
            lambda r: (
                r.groups[0].error_code
                or next(
                    (
                        p.error_code
                        for t in r.groups[0].topics
                        for p in t.partitions
                        if p.error_code
                    ),
                    0,
                )
            ),
        )
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in response.groups[0].topics
            for p in t.partitions
        }

    def owned(self) -> list[tuple[str, int]]:
        return [(t, p) for t, ps in sorted(self.assignment.items()) for p in ps]


async def create_topic(conn: ProtocolClient, name: str, partitions: int) -> int:
    """Create a topic (replication factor 1); TOPIC_ALREADY_EXISTS counts as success."""
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[],
            )
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    response = await conn.request(request, VERSIONS["CreateTopics"])
    error = int(response.topics[0].error_code)
    return 0 if error == ErrorCode.TOPIC_ALREADY_EXISTS else error


def _first_partition_error(response: Any) -> int:
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code:
                return int(partition.error_code)
    return 0


def error_name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return f"error {error}"
