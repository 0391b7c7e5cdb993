"""A simulated consumer-group member speaking the classic group protocol over `ProtocolClient`.

It does what a Java consumer's coordinator client does, and no more: FindCoordinator; the
two-step JoinGroup (an empty member id is answered MEMBER_ID_REQUIRED with an id to rejoin
with; a static member, with a group.instance.id, skips that); SyncGroup, where the leader
computes a range or round-robin assignment from Metadata and the members' subscriptions
(kafka-python's ConsumerProtocolSubscription / ConsumerProtocolAssignment encodings); a
heartbeat loop that rejoins on REBALANCE_IN_PROGRESS; OffsetCommit / OffsetFetch; LeaveGroup.

Every request and every join round is timed into a `Recorder`. Thousands of members share one
event loop, so a member holds no task of its own unless its heartbeat loop is started, and its
Heartbeat is encoded once per generation (`ProtocolClient.prepare`).

The leader writes the size of the generation it assigned into each assignment's user_data, so
every member (not only the leader) knows how many members its generation has: that is how a
load generator spread over many processes tells that a group of N has settled, without asking
the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from minicoord.clients.assignors import assign
from minicoord.clients.connection import PreparedRequest, ProtocolClient
from minicoord.clients.timings import Recorder
from minicoord.protocol.errors import ErrorCode

# The newest version of each API that still names topics by name (OffsetCommit v10 and
# OffsetFetch v10 use topic ids) and that minicoord and Kafka 3.x/4.x brokers both serve.
VERSIONS = {
    "FindCoordinator": 4,
    # v9: the newest without topic ids. From v10 a topic named by name carries the zero UUID,
    # which kafka-python decodes as null (a server validating nullability may refuse it).
    "Metadata": 9,
    "JoinGroup": 9,
    "SyncGroup": 5,
    "Heartbeat": 4,
    "LeaveGroup": 5,
    "OffsetCommit": 9,
    "OffsetFetch": 8,
    "CreateTopics": 7,
}
ZERO_UUID = uuid.UUID(int=0)
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1
_GROUP_SIZE = struct.Struct(">i")

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


class GroupMember:
    def __init__(
        self,
        conn: ProtocolClient,
        group_id: str,
        topics: Sequence[str],
        *,
        index: int = 0,
        assignor: str = "range",
        session_timeout_ms: int = 30_000,
        rebalance_timeout_ms: int = 60_000,
        heartbeat_interval_ms: int = 3_000,
        group_instance_id: str | None = None,
        recorder: Recorder | None = None,
        partitions: dict[str, int] | None = None,
    ) -> None:
        self.conn = conn
        self.group_id = group_id
        self.topics = list(topics)
        self.index = index
        self.assignor = assignor
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.group_instance_id = group_instance_id
        self.recorder = recorder if recorder is not None else Recorder()
        # Partition counts the leader assigns from; shared between members of one process so
        # that a process of a thousand members asks Metadata once, not a thousand times.
        self.partitions = partitions if partitions is not None else {}
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.protocol_name = assignor
        self.assignment: dict[str, list[int]] = {}
        self.group_size = 0  # members in the generation we hold an assignment for
        self.joins = 0  # JoinGroup round trips so far (both steps count)
        self.rounds = 0  # completed join+sync rounds (generations this member took part in)
        self.first_join_at = 0.0  # perf_counter of the first JoinGroup sent
        self.assigned_at = 0.0  # perf_counter of the latest assignment received
        self.errors: dict[int, int] = {}
        # Called after every assignment received (a load generator counts settled members).
        self.on_assigned: Callable[[GroupMember], None] | None = None
        self._heartbeat: PreparedRequest | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._metadata = bytes(
            ConsumerProtocolSubscription(
                version=SUBSCRIPTION_VERSION,
                topics=self.topics,
                user_data=None,
                owned_partitions=[],
            ).encode(version=SUBSCRIPTION_VERSION)
        )

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
        return self.partitions

    # -- joining ---------------------------------------------------------------------------

    async def join(self) -> dict[str, list[int]]:
        """Join (or rejoin) the group and sync until we hold an assignment; returns it."""
        self._heartbeat = None
        round_start = time.perf_counter()
        if not self.first_join_at:
            self.first_join_at = round_start
        joins_before = self.joins
        for _ in range(MAX_JOIN_ATTEMPTS):
            joined = await self._join_once()
            if joined is None:
                continue
            error, assignment = await self._sync(joined)
            if error == 0:
                now = time.perf_counter()
                self.assignment = assignment
                self.assigned_at = now
                self.rounds += 1
                self.recorder.phase(
                    "rebalance",
                    self.group_id,
                    self.index,
                    round_start,
                    now,
                    group_size=self.group_size,
                    generation=self.generation,
                    value=self.joins - joins_before,
                )
                if self.on_assigned is not None:
                    self.on_assigned(self)
                return assignment
            if error == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            elif error in RETRIABLE:
                await asyncio.sleep(RETRY_BACKOFF_S)
            # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: the group moved on; join again.
        raise MemberError(f"no assignment after {MAX_JOIN_ATTEMPTS} attempts")

    async def _join_once(self) -> Any | None:
        """One JoinGroup round trip; the response when it holds a generation, else None."""
        request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name=self.assignor, metadata=self._metadata
                )
            ],
            reason=None,
        )
        self.joins += 1
        response = await self._call("JoinGroup", request, lambda r: r.error_code)
        error = response.error_code
        if error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            return None
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return None
        if error in RETRIABLE or error == ErrorCode.REBALANCE_IN_PROGRESS:
            await asyncio.sleep(RETRY_BACKOFF_S)
            return None
        if error:
            raise MemberError(f"JoinGroup failed: {_name(error)}", error)
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.leader_id = response.leader
        self.protocol_name = response.protocol_name or self.assignor
        return response

    async def _sync(self, joined: Any) -> tuple[int, dict[str, list[int]]]:
        assignments = []
        if joined.leader == self.member_id and not joined.skip_assignment:
            assignments = await self._lead(joined.members)
        request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        response = await self._call("SyncGroup", request, lambda r: r.error_code)
        if response.error_code:
            return response.error_code, {}
        assignment, size = decode_assignment(bytes(response.assignment))
        self.group_size = size
        return 0, assignment

    async def _lead(self, members: Sequence[Any]) -> list[Any]:
        subscriptions: dict[str, list[str]] = {}
        for m in members:
            sub = ConsumerProtocolSubscription.decode(bytes(m.metadata))
            subscriptions[m.member_id] = list(sub.topics)
        wanted = {t for topics in subscriptions.values() for t in topics}
        if not wanted <= self.partitions.keys():
            await self.fetch_metadata()
        plan = assign(self.protocol_name, subscriptions, self.partitions)
        size = len(members)
        return [
            SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=member_id, assignment=encode_assignment(owned, size)
            )
            for member_id, owned in plan.items()
        ]

    # -- staying in the group --------------------------------------------------------------

    async def heartbeat(self) -> int:
        """One Heartbeat; its error code (REBALANCE_IN_PROGRESS: time to rejoin)."""
        prepared = self._heartbeat
        if prepared is None:
            prepared = self._heartbeat = self.conn.prepare(
                HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=self.group_instance_id,
                ),
                VERSIONS["Heartbeat"],
            )
        t0 = time.perf_counter()
        try:
            response = await self.conn.request_prepared(prepared)
        except ConnectionError:
            self.recorder.request(
                "Heartbeat", self.group_id, self.index, t0, time.perf_counter(), -1
            )
            raise
        error: int = response.error_code
        self.recorder.request(
            "Heartbeat", self.group_id, self.index, t0, time.perf_counter(), error
        )
        if error:
            self.errors[error] = self.errors.get(error, 0) + 1
        return error

    async def heartbeat_loop(self) -> None:
        """Heartbeat every interval until cancelled; rejoin when the group rebalances."""
        interval = self.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            error = await self.heartbeat()
            if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                if error == ErrorCode.FENCED_INSTANCE_ID:
                    raise MemberError("fenced by another instance", error)
                self.member_id = ""
                await self.join()
            elif error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                await self.join()

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

    async def leave(self, reason: str | None = None) -> int:
        """Stop heartbeating and leave the group (a static member is removed by instance id)."""
        await self.stop_heartbeats()
        if not self.member_id and self.group_instance_id is None:
            return 0
        request = LeaveGroupRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            members=[
                LeaveGroupRequest.MemberIdentity(
                    member_id=self.member_id,
                    group_instance_id=self.group_instance_id,
                    reason=reason,
                )
            ],
        )
        response = await self._call(
            "LeaveGroup",
            request,
            lambda r: r.error_code or next((m.error_code for m in r.members if m.error_code), 0),
        )
        self.member_id = ""
        self.generation = -1
        self.assignment = {}
        return int(
            response.error_code or (response.members[0].error_code if response.members else 0)
        )

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


def encode_assignment(owned: Mapping[str, Sequence[int]], group_size: int) -> bytes:
    return bytes(
        ConsumerProtocolAssignment(
            version=ASSIGNMENT_VERSION,
            assigned_partitions=[
                ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=list(ps))
                for t, ps in sorted(owned.items())
            ],
            user_data=_GROUP_SIZE.pack(group_size),
        ).encode(version=ASSIGNMENT_VERSION)
    )


def decode_assignment(data: bytes) -> tuple[dict[str, list[int]], int]:
    """(topic -> partitions, size of the generation: 0 when the leader did not say)."""
    if not data:
        # A leader may send nothing at all to a member that gets no partitions.
        return {}, 0
    decoded = ConsumerProtocolAssignment.decode(data)
    owned = {tp.topic: list(tp.partitions) for tp in decoded.assigned_partitions}
    user_data = decoded.user_data
    size = 0
    if isinstance(user_data, bytes | bytearray | memoryview) and len(user_data) == 4:
        (size,) = _GROUP_SIZE.unpack(bytes(user_data))
    return owned, size


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


def _name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return f"error {error}"
