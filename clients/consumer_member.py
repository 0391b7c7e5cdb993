"""A simulated consumer-group member speaking the KIP-848 consumer protocol
(ConsumerGroupHeartbeat v1), as librdkafka's and the Java client's consumer-protocol
implementations do, and no more:

- It names itself (KIP-1082: the member id is the client's, a random Uuid), joins with epoch 0
  and its subscription, and from then on heartbeats at the interval the server gives.
- It sends the full request (subscription, rebalance timeout, owned partitions) only when
  something changed, and the bare group/member/epoch otherwise, the way real clients keep the
  steady-state heartbeat small.
- An assignment in a response is taken at once: this member has no records to finish, so it
  revokes and assigns instantly and reports what it owns in a heartbeat sent right away.
- FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: it drops its partitions and rejoins at epoch 0
  under the same member id, as the clients do.

Each assignment change is timed into the `Recorder` as a "rebalance" phase, from the heartbeat
that started the change (the join, or the first heartbeat after the previous assignment) to
the response that completed it. How many members the group has is not in the protocol: a load
generator learns that a group settled from ConsumerGroupDescribe (`describe_group`).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
from minicoord.protocol.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from minicoord.protocol.errors import ErrorCode

TopicPartitions = ConsumerGroupHeartbeatRequest.TopicPartitions
# The member must start over: its epoch is no longer the group's idea of it.
REJOIN = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


def client_member_id() -> str:
    """A Uuid in Kafka's text form (URL-safe base64, no padding), as clients generate them."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerProtocolMember(MemberBase):
    def __init__(
        self,
        conn: ProtocolClient,
        group_id: str,
        topics: Sequence[str],
        *,
        index: int = 0,
        server_assignor: str | None = None,
        rebalance_timeout_ms: int = 60_000,
        group_instance_id: str | None = None,
        recorder: Recorder | None = None,
        partitions: dict[str, int] | None = None,
        topic_ids: dict[uuid.UUID, str] | None = None,
    ) -> None:
        super().__init__(
            conn,
            group_id,
            topics,
            index=index,
            group_instance_id=group_instance_id,
            recorder=recorder,
            partitions=partitions,
            topic_ids=topic_ids,
        )
        self.server_assignor = server_assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = client_member_id()
        self.generation = 0  # the member epoch
        self.heartbeat_interval_ms = 5_000  # until the server says
        self.owned_ids: dict[uuid.UUID, list[int]] = {}
        self._report_owned = False  # owned partitions changed since the last heartbeat sent
        self._change_started = 0.0  # when the assignment change under way began
        # The bare heartbeat, encoded once per epoch: (that epoch, its frame).
        self._steady: tuple[int, PreparedRequest] | None = None

    # -- requests --------------------------------------------------------------------------

    def _request(self, epoch: int, full: bool) -> ConsumerGroupHeartbeatRequest:
        owned = None
        if full or self._report_owned:
            owned = [
                TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(self.owned_ids.items())
            ]
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
            rack_id=None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=self.topics if full else None,
            subscribed_topic_regex=None,
            server_assignor=self.server_assignor if full else None,
            topic_partitions=owned,
        )

    async def _send(self, epoch: int, full: bool = False) -> Any:
        if not full and not self._report_owned:
            # Keyed by epoch: a leave (-1, -2) or a heartbeat at an epoch set by hand must not
            # go out as the cached heartbeat at the current one.
            steady = self._steady
            if steady is not None and steady[0] == epoch:
                prepared = steady[1]
            else:
                prepared = self.conn.prepare(
                    self._request(epoch, False), VERSIONS["ConsumerGroupHeartbeat"]
                )
                if epoch > 0:
                    self._steady = (epoch, prepared)
            t0 = time.perf_counter()
            try:
                response = await self.conn.request_prepared(prepared)
            except ConnectionError:
                self._record(t0, -1)
                raise
        else:
            t0 = time.perf_counter()
            request = self._request(epoch, full)
            self._report_owned = False
            try:
                response = await self.conn.request(request, VERSIONS["ConsumerGroupHeartbeat"])
            except ConnectionError:
                self._record(t0, -1)
                raise
        self._record(t0, response.error_code)
        return response

    def _record(self, t0: float, error: int) -> None:
        self.recorder.request(
            "ConsumerGroupHeartbeat", self.group_id, self.index, t0, time.perf_counter(), error
        )
        if error > 0:
            self.errors[error] = self.errors.get(error, 0) + 1

    # -- joining and staying ---------------------------------------------------------------

    async def join(self) -> dict[str, list[int]]:
        """Join at epoch 0 and heartbeat until the server hands this member an assignment
        (possibly empty, when there are more members than partitions); returns it."""
        if not self.topic_ids or not set(self.topics) <= set(self.topic_ids.values()):
            await self.fetch_metadata()
        self._change_started = time.perf_counter()
        if not self.first_join_at:
            self.first_join_at = self._change_started
        self.generation = 0
        self.owned_ids = {}
        self._steady = None
        # A member that rejoins (fenced, or a new life under churn) took assignments before:
        # only one taken by this join counts.
        rounds = self.rounds
        for _ in range(MAX_JOIN_ATTEMPTS):
            response = await self._send(0, full=True)
            error = response.error_code
            if error == 0:
                self._take(response)
                if self.rounds > rounds:
                    return self.assignment
                break
            if error not in RETRIABLE:
                raise MemberError(
                    f"ConsumerGroupHeartbeat failed: {error_name(error)}: {response.error_message}",
                    error,
                )
            await asyncio.sleep(RETRY_BACKOFF_S)
        else:
            raise MemberError(f"not joined after {MAX_JOIN_ATTEMPTS} attempts")
        # Joined without an assignment yet (another member still holds what we will get).
        for _ in range(MAX_JOIN_ATTEMPTS):
            await asyncio.sleep(min(self.heartbeat_interval_ms, 200) / 1000)
            error = await self.heartbeat()
            if error in REJOIN:
                return await self.join()
            if self.rounds > rounds:
                return self.assignment
        raise MemberError(f"no assignment after {MAX_JOIN_ATTEMPTS} heartbeats")

    def _take(self, response: Any) -> None:
        """Apply a successful response: the epoch, the interval, and any new assignment."""
        if response.member_epoch != self.generation:
            self._steady = None
        self.generation = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        assignment = response.assignment
        if assignment is None:
            return
        now = time.perf_counter()
        self.owned_ids = {tp.topic_id: sorted(tp.partitions) for tp in assignment.topic_partitions}
        self.assignment = {
            self.topic_ids.get(t, str(t)): ps for t, ps in self.owned_ids.items() if ps
        }
        self._report_owned = True
        self._steady = None
        self.assigned_at = now
        self.rounds += 1
        self.recorder.phase(
            "rebalance",
            self.group_id,
            self.index,
            self._change_started or now,
            now,
            group_size=self.group_size,
            generation=self.generation,
            value=1,
        )
        self._change_started = 0.0
        if self.on_assigned is not None:
            self.on_assigned(self)

    async def heartbeat(self) -> int:
        """One heartbeat at the current epoch; its error code. Fenced: rejoin from epoch 0."""
        if not self._change_started:
            self._change_started = time.perf_counter()
        response = await self._send(self.generation)
        error: int = response.error_code
        if error == 0:
            self._take(response)
            if response.assignment is None:
                # Nothing changed: the next change starts timing at its own heartbeat.
                self._change_started = 0.0
        elif error in REJOIN:
            self.generation = 0
            self.owned_ids = {}
            self.assignment = {}
        return error

    async def heartbeat_loop(self) -> None:
        """Heartbeat at the server's interval until cancelled; rejoin when fenced. After an
        assignment change the next heartbeat goes at once, acknowledging what it now owns,
        as the Java client and librdkafka do when they finish reconciling."""
        while True:
            if not self._report_owned:
                await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            error = await self.heartbeat()
            if error in REJOIN:
                await self.join()
            elif error == ErrorCode.FENCED_INSTANCE_ID or error == ErrorCode.UNRELEASED_INSTANCE_ID:
                raise MemberError(f"static member refused: {error_name(error)}", error)

    async def leave(self, reason: str | None = None) -> int:
        """Leave (epoch -1), or for a static member step out for now (epoch -2)."""
        await self.stop_heartbeats()
        epoch = LEAVE_EPOCH if self.group_instance_id is None else STATIC_LEAVE_EPOCH
        response = await self._send(epoch, full=False) if self.generation > 0 else None
        self.generation = 0
        self.assignment = {}
        self.owned_ids = {}
        return 0 if response is None else int(response.error_code)


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """What ConsumerGroupDescribe says of a group, reduced to what settling means."""

    error: int
    state: str
    epoch: int
    assignment_epoch: int
    member_epochs: tuple[int, ...]
    owned: tuple[tuple[uuid.UUID, int], ...]  # every (topic id, partition) some member holds
    # Per member id, what the server has given it: a member whose answer is still on its way
    # is at the group epoch here before it holds what this says.
    by_member: tuple[tuple[str, frozenset[tuple[uuid.UUID, int]]], ...] = ()

    def owned_by(self, member_id: str) -> frozenset[tuple[uuid.UUID, int]] | None:
        return next((owned for m, owned in self.by_member if m == member_id), None)

    def settled(self, members: int, partitions: int) -> bool:
        """Every partition owned once, every one of `members` members at the group epoch."""
        return (
            self.error == 0
            and self.state == "Stable"
            and len(self.member_epochs) == members
            and all(e == self.epoch for e in self.member_epochs)
            and len(self.owned) == partitions
            and len(set(self.owned)) == partitions
        )


async def describe_group(conn: ProtocolClient, group_id: str) -> GroupSnapshot:
    request = ConsumerGroupDescribeRequest(
        group_ids=[group_id], include_authorized_operations=False
    )
    response = await conn.request(request, VERSIONS["ConsumerGroupDescribe"])
    g = response.groups[0]
    return GroupSnapshot(
        error=g.error_code,
        state=g.group_state,
        epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        member_epochs=tuple(m.member_epoch for m in g.members),
        owned=tuple(
            (tp.topic_id, p)
            for m in g.members
            for tp in m.assignment.topic_partitions
            for p in tp.partitions
        ),
        by_member=tuple(
            (
                m.member_id,
                frozenset(
                    (tp.topic_id, p) for tp in m.assignment.topic_partitions for p in tp.partitions
                ),
            )
            for m in g.members
        ),
    )
