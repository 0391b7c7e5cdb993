"""Consumer-group members leaving and being fenced, their session and rebalance timers,
topic changes, and the operator's and loader's entry points. A mixin of ConsumerGroupManager
(manager.py), which owns the state and the heartbeat path this uses."""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer import targets
from minicoord.server.coordinator.consumer.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from minicoord.server.coordinator.consumer.requests import (
    HeartbeatError,
    HeartbeatOutcome,
    HeartbeatRequest,
)
from minicoord.server.coordinator.consumer.targets import Describable, TopicsView
from minicoord.server.coordinator.results import (
    Effects,
    JoinOutcome,
    SyncOutcome,
)
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")


class MemberLifecycle:
    config: Config
    timers: TimerQueue
    groups: dict[str, Any]
    topics: TopicsView
    downgrade: Callable[[Effects, int, ConsumerGroup, list[str]], bool] | None
    # Offsets partitions not served now (the coordinator's status dict): their sessions wait.
    paused: Container[int] = frozenset()
    # Groups with their own consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    # (group configs): the coordinator's GroupConfigs dicts, usually empty.
    session_overrides: Mapping[str, int] = MappingProxyType({})
    interval_overrides: Mapping[str, int] = MappingProxyType({})

    if TYPE_CHECKING:
        # Provided by ConsumerGroupManager's epochs mixin (epochs.py).
        def bump(self, fx: Effects, now: int, group: ConsumerGroup, reason: str) -> None: ...
        def _maybe_assign(self, fx: Effects, now: int, group: ConsumerGroup) -> None: ...
        def _maybe_stable(self, group: ConsumerGroup, now: int) -> None: ...

    # -- leaving and fencing ----------------------------------------------------------------

    def leave(
        self, fx: Effects, now: int, req: HeartbeatRequest, group: ConsumerGroup
    ) -> HeartbeatOutcome:
        """Epoch -1 (leave) or -2 (a static member that will come back)."""
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group.group_id}.",
                )
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if member.member_id != req.member_id:
                raise HeartbeatError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {member.member_id}.",
                )
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            updated = member.copy()
            updated.epoch = STATIC_LEAVE_EPOCH
            updated.pending = {}
            group.put(updated)
            targets.write_current(fx, group, updated)
            self.timers.cancel(("cg-rebalance", group.group_id, member.member_id))
            log.info(
                "group %s: static member %s (%s) left for now; its partitions wait for it",
                group.group_id,
                member.member_id,
                member.instance_id,
            )
            return HeartbeatOutcome(
                ErrorCode.NONE, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH
            )
        log.info("group %s: member %s left", group.group_id, member.member_id)
        self.fence(fx, now, group, [member.member_id], f"member {member.member_id} left")
        return HeartbeatOutcome(
            ErrorCode.NONE, member_id=member.member_id, member_epoch=LEAVE_EPOCH
        )

    def fence(
        self, fx: Effects, now: int, group: ConsumerGroup, member_ids: list[str], reason: str
    ) -> None:
        """Remove members (leave, timeouts, an operator): their partitions are free, the
        epoch bumps, the rest follow a new target. The group may turn classic again."""
        gone = [group.members[m] for m in member_ids if m in group.members]
        if not gone:
            return
        if self.downgrade is not None and self.downgrade(
            fx, now, group, [m.member_id for m in gone]
        ):
            for member in gone:
                self.cancel_member_timers(group, member.member_id)
                self._release_classic_replies(fx, member)
            return
        regexes_before = {m.regex for m in group.members.values() if m.regex}
        for member in gone:
            targets.write_member_tombstones(fx, group, member.member_id)
            group.remove(member.member_id)
            self.cancel_member_timers(group, member.member_id)
            self._release_classic_replies(fx, member)
        for regex in regexes_before - {m.regex for m in group.members.values() if m.regex}:
            group.regexes.pop(regex, None)
            targets.write_regex(fx, group, regex)
        group.metadata_hash = targets.metadata_hash(group.subscribed_topics(), self.topics)
        self.bump(fx, now, group, reason)
        if not group.members:
            # Kafka 4.4 (KAFKA-20442): an empty group's target is current, and its zero
            # timestamp lets the next member's assignment be computed at once.
            group.assignment_epoch = group.epoch
            group.assignment_timestamp = 0
            self.timers.cancel(("cg-assign", group.group_id))
            targets.write_target_epoch(fx, group, 0)
        elif any(m.uses_classic for m in group.members.values()):
            # A consumer-protocol member's next heartbeat computes the new target; a classic
            # member's heartbeat only asks it to rejoin once there is one. A group left with
            # classic members only (its way back to classic refused by the policy or by
            # group.max.size) would keep the departed member's partitions unowned.
            self._maybe_assign(fx, now, group)
        self._maybe_stable(group, now)

    def _release_classic_replies(self, fx: Effects, member: ConsumerMember) -> None:
        if member.join_ticket is not None:
            fx.reply(
                member.join_ticket,
                JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id),
            )
            member.join_ticket = None
        if member.sync_ticket is not None:
            fx.reply(member.sync_ticket, SyncOutcome(ErrorCode.UNKNOWN_MEMBER_ID))
            member.sync_ticket = None

    # -- timers ---------------------------------------------------------------------------

    def session_timeout_ms(self, group_id: str, member: ConsumerMember) -> int:
        if member.classic is not None:
            return member.classic.session_timeout_ms
        # The group's own consumer.session.timeout.ms (a group config), else the broker's.
        return self.session_overrides.get(group_id, self.config.group_consumer_session_timeout_ms)

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        """Move the member's session on, and have the group's sessions looked at by its end.

        One timer per group (as for classic groups), at the earliest deadline of its members:
        a heartbeat moves `last_seen` on and, nearly always, finds the timer armed earlier
        already, so it costs no timer operation; a member costs no timer entry of its own.
        """
        member.last_seen = now
        self.timers.schedule_by(
            ("cg-sessions", group.group_id),
            now + self.session_timeout_ms(group.group_id, member),
            self._on_sessions_due,
            (group.group_id,),
        )

    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        self._schedule_session(group, member, now)

    def cancel_member_timers(self, group: ConsumerGroup, member_id: str) -> None:
        # The group's session timer stays: when it fires, a member no longer there is not
        # looked at.
        for kind in ("cg-rebalance", "cg-join", "cg-sync"):
            self.timers.cancel((kind, group.group_id, member_id))

    def _live(self, group: ConsumerGroup, member_id: str) -> ConsumerMember | None:
        if self.groups.get(group.group_id) is not group:
            return None
        return group.members.get(member_id)

    def _on_sessions_due(self, now: int, group_id: str) -> Effects:
        """Fence the members of the group now under this id whose sessions have run out, then
        look again at the earliest deadline left. By id, not by group object: a group deleted
        and made again (or converted and back) under the same id has its sessions looked at
        by whichever timer comes first."""
        fx = Effects()
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return fx  # gone, or classic again (classic groups time their own sessions)
        if group.partition in self.paused:
            return fx  # started afresh when the partition is served again (restart_sessions)
        expired = [
            m.member_id
            for m in group.members.values()
            if m.last_seen + self.session_timeout_ms(group_id, m) <= now
        ]
        for member_id in expired:
            if self.groups.get(group_id) is not group:
                break  # fencing an earlier one turned the group classic (downgrade)
            member = group.members.get(member_id)
            if member is None:
                continue
            log.info(
                "group %s: member %s session timed out after %d ms; fencing it",
                group.group_id,
                member.member_id,
                self.session_timeout_ms(group_id, member),
            )
            self.fence(
                fx, now, group, [member.member_id], f"member {member.member_id} session timed out"
            )
        if self.groups.get(group_id) is group and group.members:
            earliest = min(
                m.last_seen + self.session_timeout_ms(group_id, m) for m in group.members.values()
            )
            self.timers.schedule(
                ("cg-sessions", group_id), earliest, self._on_sessions_due, (group_id,)
            )
        return fx

    def _on_assignment_due(self, now: int, group: ConsumerGroup) -> Effects:
        """A batched target assignment falls due; members pick it up on their heartbeats."""
        fx = Effects()
        if self.groups.get(group.group_id) is group:
            self._maybe_assign(fx, now, group)
        return fx

    def _on_rebalance_timeout(
        self, now: int, group: ConsumerGroup, member_id: str, epoch: int
    ) -> Effects:
        fx = Effects()
        member = self._live(group, member_id)
        if member is not None and member.epoch == epoch:
            log.info(
                "group %s: member %s failed to revoke its partitions within %d ms; fencing it",
                group.group_id,
                member_id,
                member.rebalance_timeout_ms,
            )
            self.fence(fx, now, group, [member_id], f"member {member_id} did not revoke in time")
        return fx

    # -- topics and operators ---------------------------------------------------------------

    def on_topics_changed(self, names: set[str], created: bool) -> None:
        """Topics were created, deleted or grew: their subscribers' next heartbeat recomputes
        the metadata hash (an epoch bump, a new target). Creations also re-resolve regexes."""
        for group in list(self.groups.values()):
            if not isinstance(group, ConsumerGroup):
                continue
            if created and group.regexes:
                group.regex_refresh = True
            if names & group.subscribed_topics():
                group.refresh = True

    def on_acls_changed(self) -> None:
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup) and group.regexes:
                group.regex_refresh = True

    def refresh_regexes(
        self, fx: Effects, now: int, group: ConsumerGroup, describable: Describable
    ) -> bool:
        """Re-resolve every regex after topics were created; whether any matched differently."""
        changed = False
        for regex in list(group.regexes):
            resolved = targets.resolve_regex(regex, self.topics, now, describable)
            if resolved.topics != group.regexes[regex].topics:
                group.regexes[regex] = resolved
                targets.write_regex(fx, group, regex)
                changed = True
        return changed

    def force_new_target(self, fx: Effects, now: int, group: ConsumerGroup) -> None:
        """An operator's request: a new epoch and target now; members follow on their
        heartbeats."""
        self.bump(fx, now, group, "new target assignment forced by an operator")
        self._maybe_assign(fx, now, group)

    def adopt(self, group: ConsumerGroup, now: int) -> None:
        """A group rebuilt from records: its members' sessions (and revocation deadlines)
        start now."""
        self.groups[group.group_id] = group
        if group.members:
            self.timers.schedule(
                ("cg-sessions", group.group_id),
                now
                + self.session_overrides.get(
                    group.group_id, self.config.group_consumer_session_timeout_ms
                ),
                self._on_sessions_due,
                (group.group_id,),
            )
        for member in group.members.values():
            if member.state is MemberState.UNREVOKED_PARTITIONS and not member.uses_classic:
                self.timers.schedule(
                    ("cg-rebalance", group.group_id, member.member_id),
                    now + max(member.rebalance_timeout_ms, 0),
                    self._on_rebalance_timeout,
                    (group, member.member_id, member.epoch),
                )

    def delete(self, fx: Effects, group: ConsumerGroup) -> None:
        """DeleteGroups of an Empty group: its tombstones."""
        targets.write_group_tombstones(fx, group)
        del self.groups[group.group_id]
        log.info("group %s: deleted", group.group_id)
