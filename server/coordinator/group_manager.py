"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

The rules are those of Kafka's classic group coordinator (GroupCoordinator.scala, and
GroupMetadataManager's classic paths since 3.7); where this file departs from them a comment
says so. Every entry point takes the effects accumulator of the call and `now` in ms.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record, group_metadata_key, group_metadata_value
from minicoord.server.config import Config
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.results import (
    DescribedMember,
    Effects,
    GroupDescription,
    GroupListing,
    JoinMember,
    JoinOutcome,
    LeaveMemberOutcome,
    LeaveOutcome,
    RebalanceEvent,
    SyncOutcome,
    Ticket,
    announce_rebalance,
)
from minicoord.server.coordinator.state import GroupState
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")

Protocols = list[tuple[str, bytes]]


def random_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupManager:
    def __init__(
        self,
        config: Config,
        timers: TimerQueue,
        partition_of: Callable[[str], int],
        new_member_id: Callable[[str], str] = random_member_id,
    ) -> None:
        self.config = config
        self.timers = timers
        self.partition_of = partition_of
        self.new_member_id = new_member_id
        # Every group by id, classic or (KIP-848) consumer: the consumer manager shares this
        # dict, so one id is one group of one type. The classic paths here only ever see
        # classic groups: the coordinator routes the others.
        self.groups: dict[str, Group] = {}
        # Rebalances completed (a generation handed out), for operators and benchmarks.
        self.rebalances = 0
        # Called with each finished rebalance (metrics); plain calls, no I/O.
        self.rebalance_listeners: list[Callable[[RebalanceEvent], None]] = []

    def adopt(self, group: Group, now: int) -> None:
        """Take in a group rebuilt from records; its members' sessions start now."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._schedule_session_check(group, member, now + member.session_timeout_ms)

    def drop_partition(self, partition: int) -> list[str]:
        """Forget every classic group of an offsets partition (it failed to load, or was
        unloaded)."""
        gone = [
            gid
            for gid, g in self.groups.items()
            if isinstance(g, Group) and g.partition == partition
        ]
        for gid in gone:
            group = self.groups.pop(gid)
            self._cancel_group_timers(group)
        return gone

    def forget(self, group: Group) -> None:
        """A classic group that became a consumer group: its timers stop (the conversion wrote
        its tombstone)."""
        self._cancel_group_timers(group)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def install(self, fx: Effects, now: int, group: Group, reason: str) -> None:
        """A consumer group converted back to classic: persisted, its members' sessions run,
        and it rebalances so that they rejoin as a classic group."""
        self.groups[group.group_id] = group
        self._persist_group(fx, now, group)
        for member in group.members.values():
            self._schedule_session_check(group, member, now + member.session_timeout_ms)
        self._prepare_rebalance(fx, now, group, reason)

    def expire(self, fx: Effects, now: int, group: Group) -> None:
        """Delete an Empty group that has no offsets left."""
        group.transition(GroupState.DEAD, now)
        self._cancel_group_timers(group)
        del self.groups[group.group_id]
        fx.persist(group.partition, Record(group_metadata_key(group.group_id), None))
        log.info("group %s: removed (empty, no offsets left)", group.group_id)

    def get_or_create(self, group_id: str, now: int) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, self.partition_of(group_id), now)
            self.groups[group_id] = group
        return group

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
        def fail(error: ErrorCode) -> None:
            fx.reply(ticket, JoinOutcome(error, member_id=member_id))

        if not group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not protocol_type or not protocols:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        names = {name for name, _ in protocols}

        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.get_or_create(group_id, now)
        if group.state is GroupState.DEAD:
            # The group is being deleted; the client rediscovers the coordinator and retries.
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(protocol_type, names):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        def new_member(mid: str) -> Member:
            return Member(
                member_id=mid,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=rebalance_timeout_ms,
                session_timeout_ms=session_timeout_ms,
                protocol_type=protocol_type,
                protocols=protocols,
                last_heartbeat=now,
                supports_skip_assignment=supports_skip_assignment,
                is_new=True,
                joined_at=now,
            )

        why = f"{reason} " if reason else ""
        if not member_id:
            if group_instance_id is not None:
                old_id = group.static_member_id(group_instance_id)
                if old_id is not None:
                    mid = self.new_member_id(client_id)
                    return self._replace_static_member(
                        fx, now, group, old_id, new_member(mid), ticket
                    )
            if group.size >= cfg.group_max_size:
                return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
            mid = self.new_member_id(client_id)
            if group_instance_id is None and require_known_member_id:
                # KIP-394: the member must come back with this id, which lets the coordinator
                # tell a retry from a new member; until then it holds a place in the group.
                group.pending_members.add(mid)
                self.timers.schedule(
                    ("pending", group_id, mid),
                    now + session_timeout_ms,
                    lambda t, g=group, m=mid: self._expire_pending(t, g, m),
                )
                fx.reply(ticket, JoinOutcome(ErrorCode.MEMBER_ID_REQUIRED, member_id=mid))
                return None
            return self._add_member_and_rebalance(
                fx, now, group, new_member(mid), ticket, f"{why}new member {mid} joined"
            )

        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group_id, member_id))
            return self._add_member_and_rebalance(
                fx, now, group, new_member(member_id), ticket, f"{why}member {member_id} joined"
            )

        error = self.validate_member(group, member_id, group_instance_id)
        if error is not None:
            return fail(error)
        member = group.members[member_id]
        member.last_heartbeat = now
        timeouts = (rebalance_timeout_ms, session_timeout_ms)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                fx, now, group, member, protocols, timeouts, ticket, why
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retry of a join whose answer was lost: answer it again.
                fx.reply(ticket, self._join_outcome(group, member))
            else:
                self._update_member_and_rebalance(
                    fx, now, group, member, protocols, timeouts, ticket, why
                )
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's rejoin means it wants a new assignment (e.g. its metadata changed).
                self._update_member_and_rebalance(
                    fx, now, group, member, protocols, timeouts, ticket, why
                )
            else:
                fx.reply(ticket, self._join_outcome(group, member, include_members=False))
        else:
            fail(ErrorCode.UNKNOWN_MEMBER_ID)
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
        self, fx: Effects, now: int, group: Group, member: Member, ticket: Ticket, reason: str
    ) -> None:
        group.add(member)
        group.park_join(member, ticket)
        if group.in_initial_delay:
            group.new_member_added = True
        self._schedule_session_check(group, member, now + member.session_timeout_ms)
        self._maybe_prepare_rebalance(fx, now, group, reason)

    def _update_member_and_rebalance(
        self,
        fx: Effects,
        now: int,
        group: Group,
        member: Member,
        protocols: Protocols,
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
        member.rebalance_timeout_ms, member.session_timeout_ms = timeouts
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
        member.is_new = False
        group.replace_static_member(old_id, member)
        self.timers.cancel(old)
        self._schedule_session_check(group, member, now + member.session_timeout_ms)
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

    # -- the join phase ---------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, fx: Effects, now: int, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(fx, now, group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
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
            group.state is GroupState.PREPARING_REBALANCE
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
            group.transition(GroupState.EMPTY, now)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._persist_group(fx, now, group)
            self._rebalance_done(group, now)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        members = self._join_members(group)
        for member in group.members.values():
            ticket = group.take_join(member)
            member.is_new = False
            member.last_heartbeat = now
            leader = group.is_leader(member.member_id)
            fx.reply(
                ticket,
                JoinOutcome(
                    ErrorCode.NONE,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader_id=group.leader_id or "",
                    member_id=member.member_id,
                    members=members if leader else (),
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
        def fail(error: ErrorCode) -> None:
            fx.reply(ticket, SyncOutcome(error))

        if not group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self.validate_member(group, member_id, group_instance_id)
        if error is not None:
            return fail(error)
        if generation_id != group.generation_id:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        # SyncGroup v5 names the protocol the member thinks was chosen.
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        member.last_heartbeat = now
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return fail(ErrorCode.REBALANCE_IN_PROGRESS)
        if state is GroupState.EMPTY:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group_id))
        if state is GroupState.STABLE:
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
            group.transition(GroupState.STABLE, now)
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
        return SyncOutcome(
            ErrorCode.NONE,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )

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

    # -- Heartbeat ------------------------------------------------------------------------

    def heartbeat(
        self,
        now: int,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
    ) -> ErrorCode:
        # The hot path: liveness is a field write; the session timer reads it when it fires.
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID if group_id else ErrorCode.INVALID_GROUP_ID
        state = group.state
        if state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member = group.members.get(member_id)
        if group_instance_id is not None or member is None:
            error = self.validate_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            member = group.members[member_id]
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member.last_heartbeat = now
        if state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _schedule_session_check(self, group: Group, member: Member, deadline: int) -> None:
        # Keyed by the member object itself (the timer "heartbeat:<group>:<member>"): with
        # thousands of members, no key tuple and no closure per member.
        self.timers.schedule(member, deadline, self._on_session_check, (group, member))

    def _on_session_check(self, now: int, group: Group, member: Member) -> Effects:
        fx = Effects()
        group_id, member_id = group.group_id, member.member_id
        if self.groups.get(group_id) is not group or group.members.get(member_id) is not member:
            return fx
        if member.should_keep_alive(now):
            self._schedule_session_check(group, member, member.next_session_check(now))
            return fx
        log.info(
            "group %s: member %s session timed out after %d ms; removing it",
            group_id,
            member_id,
            member.session_timeout_ms,
        )
        self._remove_member(fx, group, member)
        self._after_removal(fx, now, group, f"member {member_id} session timed out")
        return fx

    def _expire_pending(self, now: int, group: Group, member_id: str) -> Effects:
        fx = Effects()
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            log.info("group %s: pending member %s never rejoined", group.group_id, member_id)
            self._try_complete_join(fx, now, group)
        return fx

    # -- LeaveGroup -----------------------------------------------------------------------

    def leave(
        self, fx: Effects, now: int, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> LeaveOutcome:
        if not group_id:
            return LeaveOutcome(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return LeaveOutcome(
                ErrorCode.NONE,
                tuple(LeaveMemberOutcome(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving),
            )
        if group.state is GroupState.DEAD:
            return LeaveOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        outcomes = []
        removed = []
        for member_id, instance_id in leaving:
            error = ErrorCode.NONE
            if instance_id is not None:
                current = group.static_member_id(instance_id)
                if current is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                elif member_id and member_id != current:
                    error = ErrorCode.FENCED_INSTANCE_ID
                else:
                    removed.append(group.members[current])
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(("pending", group_id, member_id))
                removed.append(None)
            elif member_id in group.members:
                removed.append(group.members[member_id])
            else:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            outcomes.append(LeaveMemberOutcome(member_id, instance_id, error))
        if removed:
            left = False
            for member in removed:
                if member is not None and member.member_id in group.members:
                    log.info("group %s: member %s left", group_id, member.member_id)
                    self._remove_member(fx, group, member)
                    left = True
            if left:
                self._after_removal(fx, now, group, "members left the group")
            else:
                # Only pending members left (None entries): like Kafka's
                # removePendingMemberAndUpdateGroup, that may complete a join phase under way
                # but must not start a rebalance of a Stable group.
                self._try_complete_join(fx, now, group)
        return LeaveOutcome(ErrorCode.NONE, tuple(outcomes))

    def _remove_member(self, fx: Effects, group: Group, member: Member) -> None:
        ticket = group.take_join(member)
        if ticket is not None:
            fx.reply(ticket, JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        if member.sync_ticket is not None:
            fx.reply(member.sync_ticket, SyncOutcome(ErrorCode.UNKNOWN_MEMBER_ID))
            member.sync_ticket = None
        group.remove(member.member_id)
        self.timers.cancel(member)

    def _after_removal(self, fx: Effects, now: int, group: Group, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(fx, now, group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(fx, now, group)

    # -- operator actions (fault injection) ---------------------------------------------------

    def force_rebalance(self, fx: Effects, now: int, group_id: str) -> bool:
        """Start a rebalance of a Stable or CompletingRebalance group, as a member change would."""
        group = self.groups.get(group_id)
        if group is None or not group.members or not group.can_rebalance:
            return False
        self._prepare_rebalance(fx, now, group, "rebalance forced by an operator")
        return True

    def expire_member(self, fx: Effects, now: int, group_id: str, member_id: str) -> bool:
        """Remove a member as if its session had timed out, now."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            return False
        log.info("group %s: member %s expired by an operator", group_id, member_id)
        self._remove_member(fx, group, member)
        self._after_removal(fx, now, group, f"member {member_id} expired by an operator")
        return True

    # -- admin ----------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND, "Dead", "", "")
        stable = group.state is GroupState.STABLE and group.protocol_name is not None
        protocol = group.protocol_name if stable else None
        members = tuple(
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                # Like Kafka, metadata and assignment are shown only once they are settled.
                metadata=m.metadata(protocol) if protocol else b"",
                assignment=m.assignment if protocol else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id,
            ErrorCode.NONE,
            group.state.value,
            group.protocol_type or "",
            protocol or "",
            members,
        )

    def listings(self, states: set[str] | None = None) -> list[GroupListing]:
        wanted = {s.lower() for s in states} if states else None
        return [
            GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if wanted is None or g.state.value.lower() in wanted
        ]

    def delete(self, fx: Effects, now: int, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        group.transition(GroupState.DEAD, now)
        self._cancel_group_timers(group)
        del self.groups[group_id]
        fx.persist(group.partition, Record(group_metadata_key(group_id), None))
        log.info("group %s: deleted", group_id)
        return ErrorCode.NONE

    def _cancel_group_timers(self, group: Group) -> None:
        gid = group.group_id
        self.timers.cancel(("join", gid))
        self.timers.cancel(("sync", gid))
        for member in group.members.values():
            self.timers.cancel(member)
        for mid in group.pending_members:
            self.timers.cancel(("pending", gid, mid))

    def subscribed_protocol_metadata(self, group: Group) -> list[bytes]:
        """Each member's metadata for the chosen protocol (a consumer's subscription)."""
        protocol = group.protocol_name
        if protocol is None:
            return []
        return [m.metadata(protocol) for m in group.members.values()]

    # -- records --------------------------------------------------------------------------

    def _persist_group(self, fx: Effects, now: int, group: Group) -> None:
        protocol = group.protocol_name
        value = group_metadata_value(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=now,
            members=[
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout_ms,
                    "session_timeout": m.session_timeout_ms,
                    "subscription": m.metadata(protocol) if protocol else b"",
                    "assignment": m.assignment,
                }
                for m in group.members.values()
            ],
        )
        fx.persist(group.partition, Record(group_metadata_key(group.group_id), value))
