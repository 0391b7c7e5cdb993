"""The join phase of a classic rebalance: preparing it, the initial delay, the join deadline,
and the next generation handed out with its leader.

Kafka's GroupCoordinator.scala rules; where this departs from them a comment says so. A mixin
of GroupManager (manager.py), which owns the state and the timers this uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.results import (
    Effects,
    JoinMember,
    JoinOutcome,
    RebalanceEvent,
    SyncOutcome,
    announce_rebalance,
)
from minicoord.server.coordinator.state import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    GroupState,
)
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")
# Read per member answered (see state.py on enum members in 3.11).
_NONE = ErrorCode.NONE


class RebalancePhase:
    config: Config
    timers: TimerQueue
    rebalances: int
    rebalance_listeners: list[Callable[[RebalanceEvent], None]]

    if TYPE_CHECKING:
        # Provided by GroupManager, JoinPhase (joining.py) and SyncPhase (syncing.py).
        def _persist_group(self, fx: Effects, now: int, group: Group) -> None: ...
        def _remove_member(self, fx: Effects, group: Group, member: Member) -> None: ...
        def _on_sync_deadline(self, now: int, group: Group) -> Effects: ...
        def _join_members(self, group: Group) -> tuple[JoinMember, ...]: ...

    # -- the join phase ---------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, fx: Effects, now: int, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(fx, now, group, reason)
        elif group.state is PREPARING_REBALANCE:
            self._try_complete_join(fx, now, group)

    def _prepare_rebalance(self, fx: Effects, now: int, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The assignment being waited for is void: tell parked followers to rejoin.
            for member in group.members.values():
                member.assignment = b""
                if member.sync_ticket is not None:
                    fx.reply(member.sync_ticket, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.sync_ticket = None
                    # Kafka's propagateAssignment resets the session of each member it answers.
                    member.last_heartbeat = now
        group.pending_sync.clear()
        self.timers.cancel(("sync", group.group_id))
        if group.rebalance_started_at is None:
            group.rebalance_started_at = now
            group.rebalance_reason = reason
        was_empty = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now)
        log.info(
            "group %s: preparing rebalance from generation %d: %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        initial_delay = self.config.group_initial_rebalance_delay_ms
        if was_empty and initial_delay > 0:
            delay = min(initial_delay, group.rebalance_timeout_ms)
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = group.rebalance_timeout_ms - delay
            self.timers.schedule(
                ("join", group.group_id),
                now + delay,
                lambda t, g=group: self._on_initial_delay(t, g),
            )
            return
        self._schedule_join_deadline(group, now)
        self._try_complete_join(fx, now, group)

    def _schedule_join_deadline(self, group: Group, now: int) -> None:
        self.timers.schedule(
            ("join", group.group_id),
            now + group.rebalance_timeout_ms,
            lambda t, g=group: self._on_join_deadline(t, g),
        )

    def _on_initial_delay(self, now: int, group: Group) -> Effects:
        fx = Effects()
        if group.state is not GroupState.PREPARING_REBALANCE:
            return fx
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            delay = min(
                self.config.group_initial_rebalance_delay_ms, group.initial_delay_remaining_ms
            )
            group.initial_delay_remaining_ms -= delay
            group.new_member_added = False
            self.timers.schedule(
                ("join", group.group_id),
                now + delay,
                lambda t, g=group: self._on_initial_delay(t, g),
            )
            return fx
        group.in_initial_delay = False
        self._complete_join(fx, now, group)
        return fx

    def _on_join_deadline(self, now: int, group: Group) -> Effects:
        fx = Effects()
        if group.state is GroupState.PREPARING_REBALANCE:
            self._complete_join(fx, now, group)
        return fx

    def _try_complete_join(self, fx: Effects, now: int, group: Group) -> None:
        if (
            group.state is PREPARING_REBALANCE
            and not group.in_initial_delay
            and group.has_all_members_joined()
        ):
            self._complete_join(fx, now, group)

    def _complete_join(self, fx: Effects, now: int, group: Group) -> None:
        self.timers.cancel(("join", group.group_id))
        group.in_initial_delay = False
        for member in group.not_yet_rejoined():
            # Dynamic members that missed the join phase are out; static ones keep their slot
            # until their session times out.
            if member.group_instance_id is None:
                log.info(
                    "group %s: member %s did not rejoin in time; removing it",
                    group.group_id,
                    member.member_id,
                )
                self._remove_member(fx, group, member)
        if group.members and not group.elect_joined_leader():
            # Only static members that have not rejoined remain: give them another round.
            self._schedule_join_deadline(group, now)
            return
        self._next_generation(fx, now, group)

    def _next_generation(self, fx: Effects, now: int, group: Group) -> None:
        group.generation_id += 1
        self.rebalances += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(EMPTY, now)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._persist_group(fx, now, group)
            self._rebalance_done(group, now)
            return
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        members = self._join_members(group)
        generation_id = group.generation_id
        protocol_type = group.protocol_type
        protocol_name = group.protocol_name
        leader_id = group.leader_id or ""
        for member in group.members.values():
            ticket = group.take_join(member)
            # No longer new; None lets go of one int per member.
            member.joined_at = None
            member.last_heartbeat = now
            leader = member.member_id == leader_id
            fx.reply(
                ticket,
                # Positional (error, generation, protocol type and name, leader, member id,
                # members): keywords cost a dataclass's __init__ twice, once per member.
                JoinOutcome(
                    _NONE,
                    generation_id,
                    protocol_type,
                    protocol_name,
                    leader_id,
                    member.member_id,
                    members if leader else (),
                ),
            )
        group.pending_sync = set(group.members)
        # Members that never send SyncGroup are removed after the rebalance timeout, so a
        # crashed follower cannot hold the group in CompletingRebalance forever.
        self.timers.schedule(
            ("sync", group.group_id),
            now + group.rebalance_timeout_ms,
            lambda t, g=group: self._on_sync_deadline(t, g),
        )

    def _rebalance_done(self, group: Group, now: int) -> None:
        started = group.rebalance_started_at
        event = RebalanceEvent(
            group.group_id,
            group.generation_id,
            group.state.value,
            group.rebalance_reason,
            len(group.members),
            0 if started is None else now - started,
        )
        group.rebalance_started_at = None
        group.rebalance_reason = ""
        announce_rebalance(event, self.rebalance_listeners)
