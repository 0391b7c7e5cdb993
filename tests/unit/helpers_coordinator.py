"""A small driver for the sans-IO group coordinator: time is only the `now` handed to it.

`Harness` wraps a `GroupCoordinator` with a deterministic member-id factory and keeps every
reply and record the coordinator hands back, so a test can ask for the answer to a parked
JoinGroup or SyncGroup after whichever later call (or timer) delivered it. It also checks an
invariant of the coordinator's contract on every call: a ticket is answered at most once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record, decode_key, decode_value
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.results import JoinOutcome, Result, SyncOutcome

SESSION_MS = 10_000
REBALANCE_MS = 30_000
GROUP = "group-a"


@dataclass(eq=False)
class Ticket:
    """An opaque handle for a parked reply; compared by identity, like the shell's."""

    name: str

    def __repr__(self) -> str:
        return f"Ticket({self.name})"


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """A real consumer-protocol subscription, as a Java or kafka-python consumer encodes it."""
    return bytes(
        ConsumerProtocolSubscription(topics=list(topics), user_data=user_data).encode(version=0)
    )


def assignment(topic: str, *partitions: int) -> bytes:
    return bytes(
        ConsumerProtocolAssignment(
            assigned_partitions=[(topic, list(partitions))], user_data=None
        ).encode(version=0)
    )


def range_protocols(*topics: str) -> list[tuple[str, bytes]]:
    return [("range", subscription(*(topics or ("t1",))))]


def decoded(record: Record) -> tuple[Any, Any]:
    """A `__consumer_offsets` record as (key, value), the value None for a tombstone."""
    key = decode_key(record.key)
    return key, None if record.value is None else decode_value(key, record.value)


class Harness:
    def __init__(self, config: Config | None = None, **overrides: Any) -> None:
        self.config = config or Config(**overrides)
        self._ids = itertools.count(1)
        self.coordinator = GroupCoordinator(self.config, new_member_id=self._new_member_id)
        self.delivered: dict[Ticket, Any] = {}
        self.records: list[tuple[int, Record]] = []
        self._tickets = itertools.count(1)

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{next(self._ids)}"

    def ticket(self, name: str) -> Ticket:
        return Ticket(f"{name}#{next(self._tickets)}")

    # -- bookkeeping ------------------------------------------------------------------------

    def absorb(self, result: Result[Any]) -> Result[Any]:
        for ticket, outcome in result.replies:
            assert ticket not in self.delivered, f"{ticket} answered twice"
            self.delivered[ticket] = outcome
        self.records.extend(result.records)
        return result

    def answered(self, ticket: Ticket) -> bool:
        return ticket in self.delivered

    def reply(self, ticket: Ticket) -> Any:
        assert ticket in self.delivered, f"{ticket} is still parked"
        return self.delivered[ticket]

    def group(self, group_id: str = GROUP) -> Group:
        return self.coordinator.groups.groups[group_id]

    def state(self, group_id: str = GROUP) -> str:
        return self.group(group_id).state.value

    def member_ids(self, group_id: str = GROUP) -> list[str]:
        return list(self.group(group_id).members)

    # -- requests ---------------------------------------------------------------------------

    def join(
        self,
        now: int,
        member_id: str = "",
        *,
        group_id: str = GROUP,
        instance_id: str | None = None,
        client_id: str = "c",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        protocol_type: str = "consumer",
        protocols: list[tuple[str, bytes]] | None = None,
        require_known_member_id: bool = True,
        skip_assignment: bool = False,
    ) -> Ticket:
        """Send one JoinGroup; its answer (now or later) is in `delivered`."""
        ticket = self.ticket(f"join:{member_id or instance_id or client_id}")
        self.absorb(
            self.coordinator.join_group(
                now,
                ticket,
                group_id=group_id,
                member_id=member_id,
                group_instance_id=instance_id,
                client_id=client_id,
                client_host="/127.0.0.1",
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                protocol_type=protocol_type,
                protocols=range_protocols() if protocols is None else protocols,
                require_known_member_id=require_known_member_id,
                supports_skip_assignment=skip_assignment,
            )
        )
        return ticket

    def join_new(self, now: int, **kwargs: Any) -> tuple[str, Ticket]:
        """The KIP-394 two-step join of a new dynamic member: MEMBER_ID_REQUIRED, then rejoin.

        Returns the member id and the ticket of the second (usually parked) JoinGroup.
        """
        first = self.join(now, **kwargs)
        outcome = self.reply(first)
        assert outcome.error is ErrorCode.MEMBER_ID_REQUIRED, outcome
        return outcome.member_id, self.join(now, outcome.member_id, **kwargs)

    def sync(
        self,
        now: int,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group_id: str = GROUP,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Ticket:
        ticket = self.ticket(f"sync:{member_id}")
        self.absorb(
            self.coordinator.sync_group(
                now,
                ticket,
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=assignments or {},
            )
        )
        return ticket

    def heartbeat(
        self,
        now: int,
        member_id: str,
        generation_id: int,
        *,
        group_id: str = GROUP,
        instance_id: str | None = None,
    ) -> ErrorCode:
        return self.coordinator.heartbeat(now, group_id, member_id, generation_id, instance_id)

    def leave(self, now: int, *members: tuple[str, str | None], group_id: str = GROUP) -> Any:
        return self.absorb(self.coordinator.leave_group(now, group_id, list(members))).value

    def commit(
        self,
        now: int,
        entries: list[OffsetCommitEntry],
        *,
        group_id: str = GROUP,
        generation_id: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
    ) -> list[ErrorCode]:
        result = self.coordinator.commit_offsets(
            now, group_id, generation_id, member_id, instance_id, entries
        )
        return self.absorb(result).value

    def advance(self, now: int) -> Result[None]:
        return self.absorb(self.coordinator.advance(now))

    # -- whole flows ------------------------------------------------------------------------

    def join_together(self, now: int, *specs: dict[str, Any]) -> list[tuple[str, Ticket]]:
        """Members (JoinGroup keyword arguments each) join a new group in one generation.

        Dynamic members first all get their ids (each holds a pending place), then every
        member joins in the order given; the last must be dynamic, so that until its rejoin a
        pending member holds the join phase open and the last join completes it. Returns each
        member's id and the ticket of its parked JoinGroup, in the order given.
        """
        assert specs and specs[-1].get("instance_id") is None, "the last member must be dynamic"
        given: dict[int, str] = {}
        for i, spec in enumerate(specs):
            if spec.get("instance_id") is None:
                first = self.reply(self.join(now, **spec))
                assert first.error is ErrorCode.MEMBER_ID_REQUIRED, first
                given[i] = first.member_id
        joined = []
        for i, spec in enumerate(specs):
            group_id = spec.get("group_id", GROUP)
            if i in given:
                joined.append((given[i], self.join(now, given[i], **spec)))
            else:
                ticket = self.join(now, **spec)
                mid = self.group(group_id).static_member_id(spec["instance_id"])
                assert mid is not None
                joined.append((mid, ticket))
        return joined

    def stable(self, now: int, *specs: dict[str, Any]) -> list[str]:
        """`join_together`, then every member syncs: a Stable generation 1. Returns the ids."""
        joined = self.join_together(now, *specs)
        outcomes = [self.reply(t) for _, t in joined]
        assert all(o.error is ErrorCode.NONE for o in outcomes), outcomes
        assert {o.generation_id for o in outcomes} == {1}
        ids = [mid for mid, _ in joined]
        group_id = specs[0].get("group_id", GROUP)
        self.sync_all(now, ids, 1, group_id=group_id)
        assert self.state(group_id) == "Stable"
        return ids

    def form_group(self, now: int, count: int, **kwargs: Any) -> list[str]:
        """`count` dynamic members m0, m1, ... in a Stable generation 1; the first leads."""
        return self.stable(now, *({"client_id": f"m{i}", **kwargs} for i in range(count)))

    def sync_all(
        self, now: int, ids: list[str], generation: int, *, group_id: str = GROUP
    ) -> dict[str, SyncOutcome]:
        """Followers sync first, then the leader with a one-partition-each assignment."""
        leader = self.group(group_id).leader_id
        assert leader in ids
        plan = {mid: assignment("t1", i) for i, mid in enumerate(ids)}
        tickets = {
            mid: self.sync(now, mid, generation, group_id=group_id) for mid in ids if mid != leader
        }
        tickets[leader] = self.sync(now, leader, generation, plan, group_id=group_id)
        outcomes = {mid: self.reply(t) for mid, t in tickets.items()}
        for mid, outcome in outcomes.items():
            assert outcome.error is ErrorCode.NONE, (mid, outcome)
            assert outcome.assignment == plan[mid]
        return outcomes

    def rejoin_all(self, now: int, ids: list[str], *, group_id: str = GROUP) -> list[JoinOutcome]:
        tickets = [self.join(now, mid, group_id=group_id) for mid in ids]
        return [self.reply(t) for t in tickets]
