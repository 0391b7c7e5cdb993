"""Classic JoinGroup: members joining and rejoining, new, known and static, each parked for
the join phase (rebalancing.py) or answered at once.

Kafka's GroupCoordinator.scala rules; where this departs from them a comment says so. A mixin
of GroupManager (manager.py), which owns the state and the timers this uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member, intern_protocols
from minicoord.server.coordinator.member import Protocols as SharedProtocols
from minicoord.server.coordinator.results import (
    Effects,
    JoinMember,
    JoinOutcome,
    RebalanceEvent,
    SyncOutcome,
    Ticket,
)
from minicoord.server.coordinator.state import (
    COMPLETING_REBALANCE,
    DEAD,
    PREPARING_REBALANCE,
    STABLE,
    GroupState,
)
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")
# Read per member answered (see state.py on enum members in 3.11).
_NONE = ErrorCode.NONE

Protocols = list[tuple[str, bytes]]


class JoinPhase:
    config: Config
    timers: TimerQueue
    groups: dict[str, Group]
    new_member_id: Callable[[str], str]
    rebalances: int
    rebalance_listeners: list[Callable[[RebalanceEvent], None]]

    if TYPE_CHECKING:
        # Provided by GroupManager (and SyncPhase, syncing.py).
        def get_or_create(self, group_id: str, now: int) -> Group: ...
        def _persist_group(self, fx: Effects, now: int, group: Group) -> None: ...
        def _remove_member(self, fx: Effects, group: Group, member: Member) -> None: ...
        def _on_sync_deadline(self, now: int, group: Group) -> Effects: ...
        def _schedule_pending_check(self, group: Group, deadline: int) -> None: ...
        def _schedule_session_check(self, group: Group, deadline: int) -> None: ...
        # Provided by RebalancePhase (rebalancing.py).
        def _maybe_prepare_rebalance(
            self, fx: Effects, now: int, group: Group, reason: str
        ) -> None: ...
        def _try_complete_join(self, fx: Effects, now: int, group: Group) -> None: ...

    # -- JoinGroup ------------------------------------------------------------------------

    def join(
        self,
        fx: Effects,
        now: int,
        *,
        ticket: Ticket,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        require_known_member_id: bool,
        supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> None:
        if not group_id:
            return _refuse(fx, ticket, ErrorCode.INVALID_GROUP_ID, member_id)
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return _refuse(fx, ticket, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if not protocol_type or not protocols:
            return _refuse(fx, ticket, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        # The shared copy (the handler interned the protocols already) and its names: no
        # set of its own per JoinGroup.
        shared, names = intern_protocols(protocols)

        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _refuse(fx, ticket, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.get_or_create(group_id, now)
        if group.state is DEAD:
            # The group is being deleted; the client rediscovers the coordinator and retries.
            return _refuse(fx, ticket, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not _accepts_joining(group, member_id, cfg.group_max_size):
            # As Kafka's classicGroupJoinToClassicGroup: the member refused leaves the group,
            # whether it was pending (KIP-394) or one that had not rejoined yet.
            was_pending = group.drop_pending(member_id)
            refused = group.members.get(member_id)
            if refused is not None:
                self._remove_member(fx, group, refused)
            if was_pending or refused is not None:
                # The join phase may have been waiting for it alone.
                self._try_complete_join(fx, now, group)
            return _refuse(fx, ticket, ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        if not group.supports_protocols(protocol_type, names):
            return _refuse(fx, ticket, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)

        # What a member made by this join is made of, but its id (no closure: every JoinGroup
        # would make one, and a cell for each of these).
        fields = (
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            shared,
            now,
            supports_skip_assignment,
        )

        why = f"{reason} " if reason else ""
        if not member_id:
            if group_instance_id is not None:
                old_id = group.static_member_id(group_instance_id)
                if old_id is not None:
                    mid = self.new_member_id(client_id)
                    return self._replace_static_member(
                        fx, now, group, old_id, _new_member(mid, *fields), ticket
                    )
            mid = self.new_member_id(client_id)
            if group_instance_id is None and require_known_member_id:
                # KIP-394: the member must come back with this id, which lets the coordinator
                # tell a retry from a new member; until then it holds a place in the group.
                deadline = now + session_timeout_ms
                group.pending_members[mid] = deadline
                self._schedule_pending_check(group, deadline)
                fx.reply(ticket, JoinOutcome(ErrorCode.MEMBER_ID_REQUIRED, member_id=mid))
                return None
            return self._add_member_and_rebalance(
                fx,
                now,
                group,
                _new_member(mid, *fields),
                protocol_type,
                ticket,
                f"{why}new member {mid} joined",
            )

        if group.drop_pending(member_id):
            return self._add_member_and_rebalance(
                fx,
                now,
                group,
                _new_member(member_id, *fields),
                protocol_type,
                ticket,
                f"{why}member {member_id} joined",
            )

        error = self.validate_member(group, member_id, group_instance_id)
        if error is not None:
            return _refuse(fx, ticket, error, member_id)
        member = group.members[member_id]
        member.last_heartbeat = now
        timeouts = (rebalance_timeout_ms, session_timeout_ms)
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(fx, now, group, member, shared, timeouts, ticket, why)
        elif state is COMPLETING_REBALANCE:
            if member.matches(shared):
                # A retry of a join whose answer was lost: answer it again.
                fx.reply(ticket, self._join_outcome(group, member))
            else:
                self._update_member_and_rebalance(
                    fx, now, group, member, shared, timeouts, ticket, why
                )
        elif state is STABLE:
            if group.is_leader(member_id) or not member.matches(shared):
                # A leader's rejoin means it wants a new assignment (e.g. its metadata changed).
                self._update_member_and_rebalance(
                    fx, now, group, member, shared, timeouts, ticket, why
                )
            else:
                fx.reply(ticket, self._join_outcome(group, member, include_members=False))
        else:
            _refuse(fx, ticket, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        return None

    def validate_member(
        self, group: Group, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _join_outcome(
        self, group: Group, member: Member, include_members: bool | None = None
    ) -> JoinOutcome:
        leader = group.leader_id or ""
        if include_members is None:
            include_members = leader == member.member_id
        return JoinOutcome(
            ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=leader,
            member_id=member.member_id,
            members=self._join_members(group) if include_members else (),
        )

    def _join_members(self, group: Group) -> tuple[JoinMember, ...]:
        protocol = group.protocol_name
        assert protocol is not None
        return tuple(
            JoinMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in group.members.values()
        )

    def _add_member_and_rebalance(
        self,
        fx: Effects,
        now: int,
        group: Group,
        member: Member,
        protocol_type: str,
        ticket: Ticket,
        reason: str,
    ) -> None:
        group.add(member, protocol_type)
        group.park_join(member, ticket)
        if group.in_initial_delay:
            group.new_member_added = True
        self._schedule_session_check(group, now + member.session_timeout_ms)
        self._maybe_prepare_rebalance(fx, now, group, reason)

    def _update_member_and_rebalance(
        self,
        fx: Effects,
        now: int,
        group: Group,
        member: Member,
        protocols: SharedProtocols,
        timeouts: tuple[int, int],
        ticket: Ticket,
        why: str,
    ) -> None:
        previous = group.take_join(member)
        if previous is not None and previous is not ticket:
            # The client gave up on its earlier JoinGroup and sent another.
            fx.reply(previous, JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        group.update_protocols(member, protocols)
        # Like Kafka's updateMember, a rejoin also takes the request's timeouts: the group's
        # rebalance timeout (the largest member's) and the session check must see them.
        member.set_timeouts(*timeouts)
        group.park_join(member, ticket)
        self._maybe_prepare_rebalance(fx, now, group, f"{why}member {member.member_id} rejoined")

    def _replace_static_member(
        self, fx: Effects, now: int, group: Group, old_id: str, member: Member, ticket: Ticket
    ) -> None:
        """A static member came back with a new process: it takes over its old slot.

        The old member id is fenced; in a Stable group whose protocol choice does not change
        the newcomer gets the current generation and assignment without a rebalance.
        """
        old = group.members[old_id]
        fenced_join = group.take_join(old)
        if fenced_join is not None:
            fx.reply(fenced_join, JoinOutcome(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        if old.sync_ticket is not None:
            fx.reply(old.sync_ticket, SyncOutcome(ErrorCode.FENCED_INSTANCE_ID))
            old.sync_ticket = None
        current_leader = group.leader_id or ""
        member.joined_at = None
        group.replace_static_member(old_id, member)
        self._schedule_session_check(group, now + member.session_timeout_ms)
        log.info(
            "group %s: static member %s replaced %s as %s",
            group.group_id,
            member.member_id,
            old_id,
            member.group_instance_id,
        )
        state = group.state
        if state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            self._persist_group(fx, now, group)
            if member.supports_skip_assignment and group.is_leader(member.member_id):
                # KIP-814: the leader learns it leads, but must not reassign a Stable group.
                outcome = self._join_outcome(group, member, include_members=True)
                fx.reply(ticket, replace(outcome, skip_assignment=True))
            else:
                # Answering with the previous leader's id keeps a returning leader from
                # computing an assignment a Stable group would never distribute.
                outcome = self._join_outcome(group, member, include_members=False)
                fx.reply(ticket, replace(outcome, leader_id=current_leader))
            return
        group.park_join(member, ticket)
        self._maybe_prepare_rebalance(
            fx, now, group, f"static member {member.group_instance_id} rejoined"
        )


def _accepts_joining(group: Group, member_id: str, max_size: int) -> bool:
    """Kafka's acceptJoiningMember: `group.max.size` counts the members of a Stable or
    CompletingRebalance group, and those that have (re)joined in a PreparingRebalance one,
    never the pending ones (KIP-394) that have yet to come back. A member already in (or
    already rejoined) is always let in; an Empty group takes anyone."""
    state = group.state
    if state is PREPARING_REBALANCE:
        member = group.members.get(member_id)
        return (member is not None and member.awaiting_join) or group.awaiting_join < max_size
    if state is STABLE or state is COMPLETING_REBALANCE:
        return member_id in group.members or len(group.members) < max_size
    return True


def _refuse(fx: Effects, ticket: Ticket, error: ErrorCode, member_id: str) -> None:
    fx.reply(ticket, JoinOutcome(error, member_id=member_id))


def _new_member(
    member_id: str,
    group_instance_id: str | None,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    protocols: SharedProtocols,
    now: int,
    supports_skip_assignment: bool,
) -> Member:
    """A member joining now, new to the group."""
    return Member(
        member_id=member_id,
        group_instance_id=group_instance_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=session_timeout_ms,
        protocols=protocols,
        last_heartbeat=now,
        supports_skip_assignment=supports_skip_assignment,
        joined_at=now,
    )
