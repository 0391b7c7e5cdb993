"""What coordinator calls return: a value, the parked replies completed, the records to persist."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.protocol.records import Record

T = TypeVar("T")
rebalance_log = logging.getLogger("minicoord.rebalance")

# A ticket is the shell's handle for a parked reply; the coordinator stores it and hands it
# back with the outcome, never looking inside.
Ticket = Any


class Effects:
    """Accumulates the side effects of one coordinator call."""

    __slots__ = ("records", "replies")

    def __init__(self) -> None:
        # By hand, not a dataclass with default factories: that __init__ took 500 ns, and
        # every coordinator call (each JoinGroup, SyncGroup, commit) makes one.
        self.replies: list[tuple[Ticket, Any]] = []
        self.records: list[tuple[int, Record]] = []

    def __repr__(self) -> str:
        return f"Effects(replies={self.replies!r}, records={self.records!r})"

    def reply(self, ticket: Ticket, outcome: Any) -> None:
        if ticket is not None:
            self.replies.append((ticket, outcome))

    def persist(self, partition: int, record: Record) -> None:
        self.records.append((partition, record))

    def result(self, value: T) -> Result[T]:
        return Result(value, self.replies, self.records)


@dataclass(slots=True)
class Result(Generic[T]):
    value: T
    replies: list[tuple[Ticket, Any]]
    records: list[tuple[int, Record]]

    def reply_for(self, ticket: Ticket) -> Any:
        for t, outcome in self.replies:
            if t is ticket:
                return outcome
        return None


@dataclass(slots=True)  # not frozen: a leader's answer lists every member (see JoinOutcome)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


# JoinOutcome and SyncOutcome are not frozen, though never changed once made: a frozen
# dataclass sets each field through object.__setattr__, and a large group's join phase makes
# one of each per member at once.
@dataclass(slots=True)
class JoinOutcome:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncOutcome:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, frozen=True)
class LeaveMemberOutcome:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(slots=True, frozen=True)
class LeaveOutcome:
    error: ErrorCode
    members: tuple[LeaveMemberOutcome, ...] = ()


@dataclass(slots=True, frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True, frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[DescribedMember, ...] = ()
    message: str | None = None  # v6+: why, with an error (Kafka's wording)


@dataclass(slots=True, frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(slots=True, frozen=True)
class RebalanceEvent:
    """A finished rebalance: the group reached Stable (or Empty) at a new generation (classic)
    or with every member reconciled to a new epoch (consumer)."""

    group_id: str
    generation: int
    state: str
    reason: str
    members: int
    duration_ms: int
    protocol: str = "classic"


def announce_rebalance(
    event: RebalanceEvent, listeners: list[Callable[[RebalanceEvent], None]]
) -> None:
    """The one line per rebalance an operator greps for (key=value, reason quoted), and the
    listeners (metrics)."""
    import json  # here, not at start: a server that never rebalances does without it

    rebalance_log.info(
        "rebalance group=%s generation=%d state=%s members=%d duration_ms=%d reason=%s protocol=%s",
        event.group_id,
        event.generation,
        event.state,
        event.members,
        event.duration_ms,
        json.dumps(event.reason),
        event.protocol,
    )
    for listener in listeners:
        listener(event)
