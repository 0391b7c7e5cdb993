"""Classic group membership: Heartbeat, LeaveGroup, their timers, the operator's actions and
the group's records; JoinGroup is in joining.py, the join phase of a rebalance in
rebalancing.py, SyncGroup in syncing.py.

The rules are those of Kafka's classic group coordinator (GroupCoordinator.scala, and
GroupMetadataManager's classic paths since 3.7); where this package departs from them a comment
says so. Every entry point takes the effects accumulator of the call and `now` in ms.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Container

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record, group_metadata_key, group_metadata_value
from minicoord.server.config import Config
from minicoord.server.coordinator.classic.joining import JoinPhase, Protocols
from minicoord.server.coordinator.classic.rebalancing import RebalancePhase
from minicoord.server.coordinator.classic.syncing import SyncPhase
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.results import (
    DescribedMember,
    Effects,
    GroupDescription,
    GroupListing,
    JoinOutcome,
    LeaveMemberOutcome,
    LeaveOutcome,
    RebalanceEvent,
    SyncOutcome,
)
from minicoord.server.coordinator.state import DEAD, EMPTY, PREPARING_REBALANCE, GroupState
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")
# Read per member answered (see state.py on enum members in 3.11).
_NONE = ErrorCode.NONE

__all__ = ["GroupManager", "Protocols", "random_member_id"]


# Random bytes drawn from the OS a page at a time, kept as hex text and handed out 16 bytes
# (32 digits) at a time: one `getrandom` call and one `.hex()` per member id were 7 % of a
# first JoinGroup's cost (py-spy, in-process), and a crowd of new members asks for a
# thousand ids at once. The same source as os.urandom(16); no digit is handed out twice.
_RANDOM_POOL_BYTES = 4096
_random_hex = ""
_random_at = 0
# The variant nibble of an RFC 4122 UUID (10xx), for any random hex digit.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def _forget_random_pool() -> None:
    # A forked child must not hand out the ids its parent has yet to.
    global _random_hex, _random_at
    _random_hex, _random_at = "", 0


os.register_at_fork(after_in_child=_forget_random_pool)


def random_member_id(client_id: str) -> str:
    """`client_id-UUID`, as Kafka names a member (a random, version 4 UUID), written from 16
    random bytes without a `uuid.UUID`: that object is most of a new member's id's cost, and
    a crowd of new members asks for a thousand ids at once."""
    global _random_hex, _random_at
    at = _random_at
    if at + 32 > len(_random_hex):
        _random_hex = os.urandom(_RANDOM_POOL_BYTES).hex()
        at = 0
    _random_at = at + 32
    h = _random_hex[at : at + 32]
    return f"{client_id}-{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


class GroupManager(SyncPhase, JoinPhase, RebalancePhase):
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
        # Offsets partitions this coordinator does not serve now (an injected NOT_COORDINATOR
        # or load): the coordinator's own status dict. Their sessions do not run, as an
        # unloaded partition's timers do not in Kafka; restart_sessions starts them afresh.
        self.paused: Container[int] = frozenset()
        # Bound once: every group's session timer holds this one object.
        self._session_check = self._on_session_check
        self._pending_check = self._on_pending_check

    def restart_sessions(self, group: Group, now: int) -> None:
        """Every member's session starts now (the group's partition is served again)."""
        for member in group.members.values():
            member.last_heartbeat = now
        if group.members:
            earliest = min(m.next_session_check(now) for m in group.members.values())
            self._schedule_session_check(group, earliest)

    def adopt(self, fx: Effects, group: Group, now: int) -> None:
        """Take in a group rebuilt from records; its members' sessions start now. One with
        more members than group.max.size allows now rebalances (Kafka's onLoaded), so that
        those over it are refused when they rejoin."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._schedule_session_check(group, now + member.session_timeout_ms)
        limit = self.config.group_max_size
        if len(group.members) > limit and group.can_rebalance:
            self._prepare_rebalance(
                fx,
                now,
                group,
                f"Freshly-loaded group {group.group_id} (size {len(group.members)}) is over "
                f"capacity {limit}. Rebalancing in order to give a chance for consumers to "
                "commit offsets",
            )

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

    def install(
        self, fx: Effects, now: int, group: Group, reason: str, rebalance: bool = True
    ) -> None:
        """A consumer group converted back to classic: persisted, its members' sessions run,
        and (unless a static member's replacement converted it) it rebalances so that they
        rejoin as a classic group."""
        self.groups[group.group_id] = group
        self._persist_group(fx, now, group)
        for member in group.members.values():
            self._schedule_session_check(group, now + member.session_timeout_ms)
        if rebalance:
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
        if state is DEAD:
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
        if state is PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _NONE

    def _schedule_session_check(self, group: Group, deadline: int) -> None:
        """Have the group's member sessions looked at by `deadline`.

        One timer per group (keyed by the group object), at the earliest deadline of its
        members, instead of one per member: a heartbeat only moves `last_heartbeat` on, and
        when the timer fires every member's session is checked against it. A member is
        removed exactly when its own timer would have removed it, and a thousand members
        cost one timer, not a thousand heap entries."""
        self.timers.schedule_by(group, deadline, self._session_check, (group,))

    def _on_session_check(self, now: int, group: Group) -> Effects:
        fx = Effects()
        if self.groups.get(group.group_id) is not group or group.partition in self.paused:
            return fx
        lapsed = [m for m in group.members.values() if not m.should_keep_alive(now)]
        for member in lapsed:
            if group.members.get(member.member_id) is not member:
                continue  # gone with an earlier removal's effects
            log.info(
                "group %s: member %s session timed out after %d ms; removing it",
                group.group_id,
                member.member_id,
                member.session_timeout_ms,
            )
            self._remove_member(fx, group, member)
            self._after_removal(fx, now, group, f"member {member.member_id} session timed out")
        if self.groups.get(group.group_id) is group and group.members:
            earliest = min(m.next_session_check(now) for m in group.members.values())
            self._schedule_session_check(group, earliest)
        return fx

    def _schedule_pending_check(self, group: Group, deadline: int) -> None:
        """Have the group's pending members (KIP-394) looked at by `deadline`: like session
        checks, one timer per group rather than a timer, key and callback per member, which
        a crowd joining at once would all hold together."""
        self.timers.schedule_by(("pending", group), deadline, self._pending_check, (group,))

    def _on_pending_check(self, now: int, group: Group) -> Effects:
        fx = Effects()
        if self.groups.get(group.group_id) is not group:
            return fx
        pending = group.pending_members
        lapsed = [mid for mid, deadline in pending.items() if deadline <= now]
        for mid in lapsed:
            del pending[mid]
            log.info("group %s: pending member %s never rejoined", group.group_id, mid)
        if pending:
            self._schedule_pending_check(group, min(pending.values()))
        if lapsed:
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
            elif group.drop_pending(member_id):
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
        self.timers.cancel(group)  # its members' session checks
        self.timers.cancel(("pending", group))

    def subscribed_protocol_metadata(self, group: Group) -> list[bytes] | None:
        """Each member's metadata for the chosen protocol (a consumer's subscription); None
        while members have chosen none (their subscriptions are not known)."""
        protocol = group.protocol_name
        if protocol is None:
            return None if group.members else []
        return [m.metadata(protocol) for m in group.members.values()]

    # -- records --------------------------------------------------------------------------

    def _persist_group(self, fx: Effects, now: int, group: Group) -> None:
        group.in_log = True
        protocol = group.protocol_name
        value = group_metadata_value(
            group.protocol_type or "",
            group.generation_id,
            protocol,
            group.leader_id,
            now,
            [
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol) if protocol else b"",
                    m.assignment,
                )
                for m in group.members.values()
            ],
        )
        fx.persist(group.partition, Record(group_metadata_key(group.group_id), value))
