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
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from minicoord.clients.assignors import assign
from minicoord.clients.connection import PreparedRequest, ProtocolClient
from minicoord.clients.member_base import (
    MAX_JOIN_ATTEMPTS,
    RETRIABLE,
    RETRY_BACKOFF_S,
    VERSIONS,
    MemberBase,
    MemberError,
    error_name,
)
from minicoord.clients.timings import Recorder
from minicoord.protocol.errors import ErrorCode

SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1
_GROUP_SIZE = struct.Struct(">i")


class GroupMember(MemberBase):
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
        super().__init__(
            conn,
            group_id,
            topics,
            index=index,
            group_instance_id=group_instance_id,
            recorder=recorder,
            partitions=partitions,
        )
        self.assignor = assignor
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.leader_id = ""
        self.protocol_name = assignor
        self.joins = 0  # JoinGroup round trips so far (both steps count)
        self._heartbeat: PreparedRequest | None = None
        self._metadata = bytes(
            ConsumerProtocolSubscription(
                version=SUBSCRIPTION_VERSION,
                topics=self.topics,
                user_data=None,
                owned_partitions=[],
            ).encode(version=SUBSCRIPTION_VERSION)
        )

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
            raise MemberError(f"JoinGroup failed: {error_name(error)}", error)
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
