"""Classic SyncGroup: the leader's assignment handed to every member, the group Stable, and
the members that did not sync within the rebalance timeout removed.

Kafka's GroupCoordinator.scala rules; where this departs from them a comment says so. A mixin
of GroupManager (manager.py), which owns the state and the timers this uses.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.results import Effects, SyncOutcome, Ticket
from minicoord.server.coordinator.state import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupState
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")
# Read per member answered (see state.py on enum members in 3.11).
_NONE = ErrorCode.NONE


class SyncPhase:
    timers: TimerQueue
    groups: dict[str, Group]

    if TYPE_CHECKING:
        # Provided by JoinPhase and GroupManager.
        def validate_member(
            self, group: Group, member_id: str, group_instance_id: str | None
        ) -> ErrorCode | None: ...
        def _rebalance_done(self, group: Group, now: int) -> None: ...
        def _persist_group(self, fx: Effects, now: int, group: Group) -> None: ...
        def _remove_member(self, fx: Effects, group: Group, member: Member) -> None: ...
        def _after_removal(self, fx: Effects, now: int, group: Group, reason: str) -> None: ...

    # -- SyncGroup ------------------------------------------------------------------------

    def sync(
        self,
        fx: Effects,
        now: int,
        *,
        ticket: Ticket,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> None:
        if not group_id:
            return fx.reply(ticket, SyncOutcome(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None:
            return fx.reply(ticket, SyncOutcome(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is DEAD:
            return fx.reply(ticket, SyncOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = self.validate_member(group, member_id, group_instance_id)
        if error is not None:
            return fx.reply(ticket, SyncOutcome(error))
        if generation_id != group.generation_id:
            return fx.reply(ticket, SyncOutcome(ErrorCode.ILLEGAL_GENERATION))
        # SyncGroup v5 names the protocol the member thinks was chosen.
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return fx.reply(ticket, SyncOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        member = group.members[member_id]
        member.last_heartbeat = now
        state = group.state
        if state is PREPARING_REBALANCE:
            return fx.reply(ticket, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        if state is EMPTY:
            return fx.reply(ticket, SyncOutcome(ErrorCode.UNKNOWN_MEMBER_ID))
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            # A fresh set: an emptied one keeps the table it grew to, per group for good.
            group.pending_sync = set()
            self.timers.cancel(("sync", group_id))
        if state is STABLE:
            fx.reply(ticket, self._sync_outcome(group, member))
            return None
        # CompletingRebalance: followers wait for the leader's assignment.
        if member.sync_ticket is not None and member.sync_ticket is not ticket:
            fx.reply(member.sync_ticket, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_ticket = ticket
        if group.is_leader(member_id):
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self._persist_group(fx, now, group)
            group.transition(STABLE, now)
            log.info(
                "group %s: generation %d is Stable with %d members",
                group.group_id,
                group.generation_id,
                len(group.members),
            )
            self._rebalance_done(group, now)
            for m in group.members.values():
                if m.sync_ticket is not None:
                    fx.reply(m.sync_ticket, self._sync_outcome(group, m))
                    m.sync_ticket = None
                    # As Kafka's propagateAssignment does: a follower that waited here (and
                    # could not heartbeat meanwhile) gets a full session from its answer.
                    m.last_heartbeat = now
        return None

    def _sync_outcome(self, group: Group, member: Member) -> SyncOutcome:
        # Positional: a dataclass's __init__ takes keywords at twice the cost, once per member.
        return SyncOutcome(_NONE, group.protocol_type, group.protocol_name, member.assignment)

    def _on_sync_deadline(self, now: int, group: Group) -> Effects:
        fx = Effects()
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return fx
        missing = [group.members[mid] for mid in group.pending_sync if mid in group.members]
        if not missing:
            return fx
        for member in missing:
            log.info(
                "group %s: member %s did not sync within the rebalance timeout; removing it",
                group.group_id,
                member.member_id,
            )
            self._remove_member(fx, group, member)
        self._after_removal(fx, now, group, "members failed to sync")
        return fx
