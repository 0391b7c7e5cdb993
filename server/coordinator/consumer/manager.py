"""KIP-848 consumer groups: the ConsumerGroupHeartbeat path (joining, epochs, targets,
reconciliation); epochs, target assignments and reconciliation are in epochs.py, leaving,
fencing and timers in lifecycle.py.

The rules are those of Kafka's GroupMetadataManager for consumer groups (4.2 behaviour:
the target assignment is computed in the heartbeat that bumps the epoch, epochs start at 0).
Every failing check runs before anything changes, so a refused heartbeat writes nothing. Each
call takes the effects accumulator of the call and `now` in ms; state changes and the records
describing them are made together, and the records reach the log before the reply.

The epoch bumps on a change of membership, of a member's subscribed topic names (or a
resolved regex), of the preferred server assignor, or of the subscribed topics' metadata;
the target assignment is then recomputed for every member, and each member reconciles toward
it on its own heartbeats (reconcile.py). Regular expressions are resolved when a member
introduces them and again after topics are created, against the topics of this node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer import targets
from minicoord.server.coordinator.consumer.epochs import EpochsAndTargets
from minicoord.server.coordinator.consumer.group import (
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from minicoord.server.coordinator.consumer.lifecycle import MemberLifecycle
from minicoord.server.coordinator.consumer.requests import (
    HeartbeatError,
    HeartbeatOutcome,
    HeartbeatRequest,
    new_member_id,
)
from minicoord.server.coordinator.consumer.targets import Describable, InvalidRegex, TopicsView
from minicoord.server.coordinator.results import (
    Effects,
    RebalanceEvent,
)
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")
# Read on every steady heartbeat: enum members as module names (see classic's state.py on
# Python 3.11's slow `Enum.X` reads).
_STABLE = MemberState.STABLE
_NONE = ErrorCode.NONE


class ConsumerGroupManager(MemberLifecycle, EpochsAndTargets):
    def __init__(
        self,
        config: Config,
        timers: TimerQueue,
        groups: dict[str, Any],
        partition_of: Callable[[str], int],
        topics: TopicsView,
    ) -> None:
        self.config = config
        self.timers = timers
        # Shared with the classic manager: one group id is one group, of either type.
        self.groups = groups
        self.partition_of = partition_of
        self.topics = topics
        self.rebalance_listeners: list[Callable[[RebalanceEvent], None]] = []
        # Turns a group whose remaining members all speak the classic protocol back into a
        # classic group when members leave (mixed groups); set by the coordinator.
        self.downgrade: Callable[[Effects, int, ConsumerGroup, list[str]], bool] | None = None

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's own consumer.heartbeat.interval.ms (a group config), else the broker's."""
        return self.interval_overrides.get(
            group_id, self.config.group_consumer_heartbeat_interval_ms
        )

    @property
    def default_assignor(self) -> str:
        return self.config.consumer_assignors[0]

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(
        self,
        fx: Effects,
        now: int,
        req: HeartbeatRequest,
        client_id: str,
        client_host: str,
        group: ConsumerGroup,
        created: bool,
    ) -> HeartbeatOutcome:
        """A heartbeat (epoch >= 0) to `group`, existing or new (`created`, not yet listed).

        The caller has validated the request and found or made the group; HeartbeatError
        means nothing changed.
        """
        steady = self._steady(now, req, client_id, client_host, group)
        if steady is not None:
            return steady
        joining = req.member_epoch == 0
        member_id = req.member_id or new_member_id()
        self.check_size(group, req.instance_id, member_id)
        old, replaced = self._member(group, req, member_id, joining)
        prior = old if old is not None else replaced
        if prior is None:
            updated = ConsumerMember(member_id)
        else:
            # A static member back under a new id takes over everything of the old one.
            updated = prior.copy()
            updated.join_ticket = updated.sync_ticket = None
            if replaced is not None:
                updated.member_id, updated.epoch, updated.previous_epoch = member_id, 0, 0
        if req.instance_id is not None:
            updated.instance_id = req.instance_id
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        if req.topics is not None:
            updated.topics = frozenset(req.topics)
        if req.regex is not None:
            updated.regex = req.regex
        updated.client_id, updated.client_host = client_id, client_host
        updated.classic = None
        new_regex = updated.regex and updated.regex != (prior.regex if prior else "")
        if new_regex and updated.regex not in group.regexes:
            try:
                targets.compile_regex(updated.regex)
            except InvalidRegex as exc:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{updated.regex}` is not a valid regular expression:"
                    f" {exc}.",
                ) from None
        # Nothing fails from here on: changes and records are made together.
        previous_assigned = dict(updated.assigned)
        member = self.admit(
            fx, now, group, created, old, replaced, updated, req.owned, req.describable
        )
        full = (
            req.rebalance_timeout_ms != -1
            and (req.topics is not None or req.regex is not None)
            and req.owned is not None
        )
        send_assignment = joining or full or member.assigned != previous_assigned
        return HeartbeatOutcome(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=dict(member.assigned) if send_assignment else None,
        )

    def _steady(
        self, now: int, req: HeartbeatRequest, client_id: str, client_host: str,
        group: ConsumerGroup,
    ) -> HeartbeatOutcome | None:  # fmt: skip
        """The answer to the common heartbeat, from a member reconciled to a settled group
        that says nothing new: its session moves on and nothing else changes, so it is
        answered without the general path (no member copy, no records). None otherwise."""
        if (
            req.member_epoch <= 0
            or req.owned is not None
            or req.topics is not None
            or req.regex is not None
            or req.server_assignor is not None
            or req.rack_id is not None
            or req.rebalance_timeout_ms != -1
        ):
            return None
        return self.steady(
            now, group, req.member_id, req.member_epoch, req.instance_id, client_id, client_host
        )

    def steady(
        self, now: int, group: ConsumerGroup, member_id: str, epoch: int,
        instance_id: str | None, client_id: str, client_host: str,
    ) -> HeartbeatOutcome | None:  # fmt: skip
        """`_steady` for a heartbeat known to say nothing but its member id, epoch and
        instance id: the member's session moves on, or None if it is not that simple."""
        if group.refresh or group.regex_refresh or group.epoch != group.assignment_epoch:
            return None
        member = group.members.get(member_id)
        if (
            member is None
            or member.epoch != epoch
            or member.state is not _STABLE
            or member.epoch != group.assignment_epoch
            or member.classic is not None
            or member.instance_id != instance_id
            or member.client_id != client_id
            or member.client_host != client_host
        ):
            return None
        self._schedule_session(group, member, now)
        # Positional: a dataclass's __init__ takes keywords at twice the cost, on every beat.
        return HeartbeatOutcome(
            _NONE,
            None,
            member.member_id,
            member.epoch,
            self.interval_overrides.get(
                group.group_id, self.config.group_consumer_heartbeat_interval_ms
            ),
        )

    def admit(
        self,
        fx: Effects,
        now: int,
        group: ConsumerGroup,
        created: bool,
        old: ConsumerMember | None,
        replaced: ConsumerMember | None,
        updated: ConsumerMember,
        owned: Assignment | None,
        describable: Describable = None,
    ) -> ConsumerMember:
        """Take a member's new version into the group (either protocol): its records, an epoch
        bump and a new target when the subscription changed, then one reconciliation step.
        Regexes are resolved for a consumer-protocol member only, with what it may describe
        (`describable`), as Kafka resolves them in ConsumerGroupHeartbeat alone."""
        member_id = updated.member_id
        prior = old if old is not None else replaced
        if created:
            self.groups[group.group_id] = group
            log.info("group %s: created (consumer protocol)", group.group_id)
        # The group's preferred assignor is a vote of its members: only a member changing its
        # own choice (or one replacing another) can move it.
        votes_move = replaced is not None or updated.server_assignor != (
            prior.server_assignor if prior is not None else None
        )
        before = targets.preferred_assignor(group, self.default_assignor) if votes_move else ""
        if replaced is not None:
            self._replace_static(fx, group, replaced, member_id)
        names_changed = updated.topics != (prior.topics if prior else frozenset())
        regex_changed = updated.regex != (prior.regex if prior else "")
        bump = names_changed
        reason = ""
        if names_changed:
            reason = (
                f"member {member_id} joined"
                if prior is None
                else f"member {member_id} changed its subscription"
            )
        if old is None or updated.subscription() != old.subscription():
            targets.write_member(fx, group, updated)
        if regex_changed and self._update_regexes(fx, now, group, prior, updated, describable):
            bump = True
            reason = reason or f"member {member_id} changed its subscription pattern"
        if group.regex_refresh and updated.classic is None:
            group.regex_refresh = False
            if group.regexes and self.refresh_regexes(fx, now, group, describable):
                bump = True
                reason = reason or "topics matching a subscription pattern appeared"
        group.put(updated)
        if votes_move and targets.preferred_assignor(group, self.default_assignor) != before:
            bump = True
            reason = reason or "the preferred server assignor changed"
        self._maybe_bump(fx, now, group, bump, reason)
        self._maybe_assign(fx, now, group)
        self._reconcile(
            fx, now, group, updated, owned, subscription_changed=names_changed or regex_changed
        )
        member = group.members[member_id]
        self._schedule_session(group, member, now)
        self._maybe_stable(group, now)
        return member

    def check_size(self, group: ConsumerGroup, instance_id: str | None, member_id: str) -> None:
        if instance_id is not None and group.static_member(instance_id) is not None:
            return  # a returning static member is not a new one
        limit = self.config.group_consumer_max_size
        if group.size >= limit and member_id not in group.members:
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {limit} members.",
            )

    def _member(
        self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str, joining: bool
    ) -> tuple[ConsumerMember | None, ConsumerMember | None]:
        """(the member as it was, or None for a new one; a static member it replaces)."""
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return None, None
            self._check_epoch(member, req)
            return member, None
        holder = group.static_member(req.instance_id)
        if joining:
            if holder is None:
                member = group.members.get(member_id)
                if member is not None:
                    self._check_epoch(member, req)
                return member, None
            if not holder.uses_classic and holder.epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join "
                    f"the group because the instance id is owned by {holder.member_id} member.",
                )
            if holder.member_id == member_id:
                return holder, None
            return None, holder
        if holder is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
            )
        if holder.member_id != member_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by "
                f"member {holder.member_id}.",
            )
        self._check_epoch(holder, req)
        return holder, None

    def _check_epoch(self, member: ConsumerMember, req: HeartbeatRequest) -> None:
        received = req.member_epoch
        if received == 0 or received == member.epoch:
            return
        # The answer that moved the member on was lost: a retry at the previous epoch whose
        # owned partitions are a subset of what it was given is not a zombie.
        if (
            received < member.epoch
            and received == member.previous_epoch
            and req.owned is not None
            and all(ps <= member.assigned.get(t, frozenset()) for t, ps in req.owned.items())
        ):
            return
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a {'greater' if received > member.epoch else 'smaller'}"
            f" member epoch ({received}) than the one known by the group coordinator "
            f"({member.epoch}). The member must abandon all its partitions and rejoin.",
        )

    def _replace_static(
        self, fx: Effects, group: ConsumerGroup, old: ConsumerMember, member_id: str
    ) -> None:
        """The old incarnation of a static member goes; its target passes to the new id."""
        log.info(
            "group %s: static member %s replaced %s as %s",
            group.group_id,
            member_id,
            old.member_id,
            old.instance_id,
        )
        target = group.target.get(old.member_id, {})
        self.cancel_member_timers(group, old.member_id)
        targets.write_member_tombstones(fx, group, old.member_id)
        group.remove(old.member_id)
        group.target[member_id] = target
        targets.write_target(fx, group, member_id)

    def _update_regexes(
        self, fx: Effects, now: int, group: ConsumerGroup, old: ConsumerMember | None,
        new: ConsumerMember, describable: Describable,
    ) -> bool:  # fmt: skip
        """Resolve a regex new to the group, drop one no member uses any more; whether the
        subscribed topics changed (an epoch bump)."""
        changed = False
        if (
            old is not None
            and old.regex
            and old.regex != new.regex
            and group.regex_users(old.regex) <= 1
        ):
            group.regexes.pop(old.regex, None)
            targets.write_regex(fx, group, old.regex)
            changed = True
        if new.regex and new.regex not in group.regexes:
            group.regexes[new.regex] = targets.resolve_regex(
                new.regex, self.topics, now, describable
            )
            targets.write_regex(fx, group, new.regex)
            changed = True
        elif new.regex:
            changed = True
        return changed
