"""The bench's simulated members of either group protocol, as `clients/` defines them, plus
what a load generator needs to know about them over time: when each last changed (a new
assignment, or for the consumer protocol a new member epoch) and which partitions it owned
from when to when, as the member itself saw it.

The ownership timeline is the member's own view, the one a consumer application lives by:
- classic (eager, as the Java client's range and round-robin assignors and the bench's
  leader do): a member revokes everything it owns when it learns of a rebalance, before its
  JoinGroup, and owns its new assignment from the SyncGroup answer on;
- consumer protocol (KIP-848): a member owns exactly what the last ConsumerGroupHeartbeat
  answer gave it; it drops what the server asks it to give up and keeps the rest, and a
  fenced member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) drops everything.

Imported inside the Python workers: no pyspark at module level.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from minicoord.clients.consumer_member import REJOIN, ConsumerProtocolMember
from minicoord.clients.member import GroupMember
from minicoord.clients.member_base import MemberBase

CLASSIC = "classic"
CONSUMER = "consumer"
PROTOCOLS = (CLASSIC, CONSUMER)
HEARTBEAT_API = {CLASSIC: "Heartbeat", CONSUMER: "ConsumerGroupHeartbeat"}

Owned = frozenset[tuple[str, int]]
Timeline = list[tuple[float, Owned]]  # (perf_counter, what the member owned from then on)


def _note(member: Any, t: float) -> None:
    """Append the member's owned partitions at `t` to its timeline, when they changed."""
    owned = frozenset(member.owned())
    timeline: Timeline = member.timeline
    if not timeline or timeline[-1][1] != owned:
        timeline.append((t, owned))
    member.changed_at = max(member.changed_at, t)


class TrackedGroupMember(GroupMember):
    """A classic member that keeps its ownership timeline (eager revocation)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeline: Timeline = []
        self.changed_at = 0.0  # perf_counter of the latest assignment

    async def join(self) -> dict[str, list[int]]:
        # Eager: whatever this member owned is revoked before it rejoins.
        if self.assignment:
            self.assignment = {}
            _note(self, time.perf_counter())
        assignment = await super().join()
        _note(self, self.assigned_at)
        return assignment


class TrackedConsumerMember(ConsumerProtocolMember):
    """A consumer-protocol member that keeps its ownership timeline and when it last moved
    to a new epoch: a member whose partitions stay as they are learns of a new group epoch
    from an answer that carries no assignment, and is settled only from then on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeline: Timeline = []
        self.changed_at = 0.0  # perf_counter of the latest new epoch or assignment

    def _take(self, response: Any) -> None:
        epoch = self.generation
        super()._take(response)
        now = time.perf_counter()
        if response.assignment is not None:
            _note(self, self.assigned_at)
        if self.generation != epoch:
            self.changed_at = max(self.changed_at, now)

    async def heartbeat(self) -> int:
        error = await super().heartbeat()
        if error in REJOIN:
            _note(self, time.perf_counter())  # fenced: it dropped everything
        return error

    async def join(self) -> dict[str, list[int]]:
        if self.assignment:
            self.assignment = {}
            _note(self, time.perf_counter())
        return await super().join()


def make_member(
    protocol: str,
    group_id: str,
    topics: Sequence[str],
    *,
    index: int,
    params: dict[str, Any],
    group_instance_id: str | None,
    recorder: Any,
    partitions: dict[str, int] | None,
    topic_ids: dict[Any, str],
) -> MemberBase:
    """A member of `protocol` configured from the bench's parameters (connected later)."""
    if protocol == CONSUMER:
        return TrackedConsumerMember(
            None,  # type: ignore[arg-type]  # connected by the task before it starts
            group_id,
            topics,
            index=index,
            server_assignor=params.get("server_assignor"),
            rebalance_timeout_ms=int(params.get("rebalance_timeout_ms", 60_000)),
            group_instance_id=group_instance_id,
            recorder=recorder,
            # Every consumer member maps the topic ids of its assignments to names: the task
            # learns them once, before the start, instead of each member asking.
            partitions=partitions if partitions is not None else {},
            topic_ids=topic_ids,
        )
    if protocol != CLASSIC:
        raise ValueError(f"unknown group protocol {protocol!r}")
    return TrackedGroupMember(
        None,  # type: ignore[arg-type]
        group_id,
        topics,
        index=index,
        assignor=params.get("assignor", "range"),
        session_timeout_ms=int(params.get("session_timeout_ms", 30_000)),
        rebalance_timeout_ms=int(params.get("rebalance_timeout_ms", 60_000)),
        heartbeat_interval_ms=int(params.get("heartbeat_interval_ms", 3_000)),
        group_instance_id=group_instance_id,
        recorder=recorder,
        partitions=partitions,
    )


def owned_at(timeline: Timeline, t: float) -> Owned:
    """What the member owned at `t` by its timeline (nothing before its first entry)."""
    owned: Owned = frozenset()
    for at, now_owned in timeline:
        if at > t:
            break
        owned = now_owned
    return owned


def time_without(timeline: Timeline, wanted: Owned, t0: float, t1: float) -> float:
    """Seconds within [t0, t1] during which the member did not own all of `wanted`."""
    if not wanted:
        return 0.0
    missing = 0.0
    at, owned = t0, owned_at(timeline, t0)
    for change, now_owned in timeline:
        if change <= t0:
            continue
        if change >= t1:
            break
        if not wanted <= owned:
            missing += change - at
        at, owned = change, now_owned
    if not wanted <= owned:
        missing += t1 - at
    return missing


def time_empty(timeline: Timeline, t0: float, t1: float) -> float:
    """Seconds within [t0, t1] during which the member owned nothing at all."""
    empty = 0.0
    at, owned = t0, owned_at(timeline, t0)
    for change, now_owned in timeline:
        if change <= t0:
            continue
        if change >= t1:
            break
        if not owned:
            empty += change - at
        at, owned = change, now_owned
    if not owned:
        empty += t1 - at
    return empty


def reached(timeline: Timeline, wanted: Owned, t0: float) -> float | None:
    """The first instant after `t0` from which the member owned `wanted` (and kept it to
    the end of its timeline); None when it does not own it now."""
    if not timeline or not wanted <= timeline[-1][1]:
        return None
    since = None  # the start of the latest run of entries that all own `wanted`
    for at, owned in timeline:
        if not wanted <= owned:
            since = None
        elif since is None:
            since = at
    return None if since is None else max(since, t0)
