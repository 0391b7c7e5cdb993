"""Mixed groups: classic members inside a consumer group, and online migration both ways
(Kafka's GroupMetadataManager classic-to-consumer paths; `group.consumer.migration.policy`).

- Upgrade: the first consumer-protocol member joining a classic group converts it; every
  classic member becomes a member of the consumer group at the classic generation, keeping its
  assignment, and the classic members' pending joins and syncs are told to rejoin.
- Inside a consumer group a classic member still speaks JoinGroup/SyncGroup/Heartbeat: the
  server computes its assignment (no leader), its JoinGroup is answered at once with its epoch
  as the generation, its SyncGroup with its assigned partitions, and its heartbeats say
  REBALANCE_IN_PROGRESS whenever rejoining would move it on (a newer target, partitions to
  give up, or partitions it waited for that are now free).
- Downgrade: when the members left are all classic, the group becomes a classic group again
  at the group epoch, Stable with its target assignment, and rebalances once; when a classic
  member takes the place of the last consumer-protocol one (a static member, by instance id),
  it becomes classic the same way but does not rebalance, the newcomer holding the assignment
  of the member it replaced.
Empty groups change type freely, whatever the policy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record, group_metadata_key
from minicoord.server.coordinator.consumer import targets
from minicoord.server.coordinator.consumer.embedded import (
    assignment_bytes,
    names_to_ids,
    parse_subscription,
)
from minicoord.server.coordinator.consumer.group import (
    ClassicProtocols,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager
from minicoord.server.coordinator.consumer.requests import HeartbeatError, new_member_id
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.results import (
    Effects,
    JoinOutcome,
    LeaveMemberOutcome,
    LeaveOutcome,
    SyncOutcome,
    Ticket,
)
from minicoord.server.coordinator.state import GroupState

if TYPE_CHECKING:
    from minicoord.server.coordinator.classic.manager import GroupManager

log = logging.getLogger("minicoord.coordinator")
CONSUMER = "consumer"


def _policy_allows(policy: str, direction: str) -> bool:
    return policy.lower() in ("bidirectional", direction)


class MixedGroups:
    def __init__(self, classic: GroupManager, consumers: ConsumerGroupManager) -> None:
        self.classic = classic
        self.consumers = consumers
        self.config = consumers.config
        self.topics = consumers.topics
        self.timers = consumers.timers
        consumers.downgrade = self.downgrade

    @property
    def policy(self) -> str:
        return self.config.group_consumer_migration_policy

    # -- upgrade: classic -> consumer -------------------------------------------------------

    def upgrade(self, fx: Effects, now: int, old: Group) -> ConsumerGroup:
        """The consumer group a classic group becomes; records into `fx`. Changes nothing
        else (HeartbeatError refuses it): `finish_upgrade` retires the classic group once the
        heartbeat that asked for it has succeeded."""
        gid = old.group_id
        if not old.members:
            # An empty classic group (or one that only stores offsets) is simply replaced.
            fx.persist(old.partition, Record(group_metadata_key(gid), None))
            return ConsumerGroup(gid, old.partition)
        prefix = f"Cannot upgrade classic group {gid} to consumer group because"
        if not _policy_allows(self.policy, "upgrade"):
            raise HeartbeatError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"{prefix} online upgrade is disabled."
            )
        if old.protocol_type != CONSUMER:
            raise HeartbeatError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"{prefix} the group does not use the consumer embedded protocol.",
            )
        if len(old.members) > self.config.group_consumer_max_size:
            raise HeartbeatError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"{prefix} the group size exceeds the consumer group maximum size.",
            )
        group = ConsumerGroup(gid, old.partition)
        group.epoch = group.assignment_epoch = old.generation_id
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

        members = []
        for m in old.members.values():
            protocol = old.protocol_name or m.protocols[0][0]
            try:
                subscription = parse_subscription(m.metadata(protocol))
                assignment = (
                    ConsumerProtocolAssignment.decode(m.assignment) if m.assignment else None
                )
            except Exception:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"{prefix} the embedded consumer protocol is malformed.",
                ) from None
            if assignment is not None and assignment.user_data:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"{prefix} an unsupported custom assignor is in use. Please refer to the "
                    "documentation or switch to a default assignor before re-attempting the "
                    "upgrade.",
                )
            assigned = names_to_ids(
                assignment.assigned_partitions if assignment else (), self.topics
            )
            member = ConsumerMember(
                m.member_id,
                instance_id=m.group_instance_id,
                rack_id=getattr(subscription, "rack_id", None) or None,
                client_id=m.client_id,
                client_host=m.client_host,
                topics=frozenset(subscription.topics or ()),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicProtocols(m.session_timeout_ms, tuple(m.protocols)),
                epoch=old.generation_id,
                previous_epoch=old.generation_id,
                state=MemberState.STABLE,
                assigned=assigned,
            )
            group.put(member)
            group.target[member.member_id] = dict(assigned)
            members.append(member)
        group.metadata_hash = targets.metadata_hash(group.subscribed_topics(), self.topics)
        group.refresh = False
        fx.persist(old.partition, Record(group_metadata_key(gid), None))
        for member in members:
            targets.write_member(fx, group, member)
        targets.write_epoch(fx, group)
        for member in members:
            targets.write_target(fx, group, member.member_id)
        targets.write_target_epoch(fx, group, 0)
        for member in members:
            targets.write_current(fx, group, member)
        return group

    def finish_upgrade(self, fx: Effects, now: int, old: Group, group: ConsumerGroup) -> None:
        """The classic group is gone: its waiting joins and syncs must rejoin, its timers stop,
        its members' sessions now run in the consumer group."""
        for m in old.members.values():
            ticket = old.take_join(m)
            if ticket is not None:
                fx.reply(
                    ticket, JoinOutcome(ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id)
                )
            if m.sync_ticket is not None:
                fx.reply(m.sync_ticket, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_ticket = None
        self.classic.forget(old)
        for member in group.members.values():
            if member.uses_classic:
                self.consumers.schedule_session(group, member, now)
        # The classic group as it was converted, before the member that asked for it joined.
        log.info(
            "group %s: converted from classic (generation %d, %d members) to consumer",
            group.group_id,
            old.generation_id,
            len(old.members),
        )

    # -- classic members in a consumer group ------------------------------------------------

    def join(
        self,
        fx: Effects,
        now: int,
        group: ConsumerGroup,
        *,
        ticket: Ticket,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> None:
        def fail(error: ErrorCode, mid: str = "") -> None:
            # Kafka answers the errors it throws here with no member id; only
            # MEMBER_ID_REQUIRED carries one.
            fx.reply(ticket, JoinOutcome(error, member_id=mid))

        if self.policy.lower() == "disabled":
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        mid = member_id or new_member_id()
        try:
            self.consumers.check_size(group, group_instance_id, mid)
        except HeartbeatError as exc:
            return fail(exc.error)
        names = {name for name, _ in protocols}
        classic_members = [
            m for m in group.members.values() if m.uses_classic and m.member_id != mid
        ]
        if (
            protocol_type != CONSUMER
            or not protocols
            or any(
                not names & {n for n, _ in m.classic.protocols}  # type: ignore[union-attr]
                for m in classic_members
            )
        ):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not member_id and group_instance_id is None and require_known_member_id:
            return fail(ErrorCode.MEMBER_ID_REQUIRED, mid)
        old, replaced = None, None
        if group_instance_id is None:
            old = group.members.get(mid)
        else:
            holder = group.static_member(group_instance_id)
            if not member_id:
                if holder is not None:
                    replaced = holder
            elif holder is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            elif holder.member_id != member_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
            else:
                old = holder
        if old is not None and not old.uses_classic:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        try:
            subscription = parse_subscription(protocols[0][1])
        except Exception:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        prior = old if old is not None else replaced
        updated = prior.copy() if prior is not None else ConsumerMember(mid)
        if replaced is not None:
            updated.epoch = updated.previous_epoch = 0
        updated.member_id = mid
        updated.join_ticket = updated.sync_ticket = None
        updated.instance_id = group_instance_id
        rack = getattr(subscription, "rack_id", None)
        if rack:
            updated.rack_id = rack
        if rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = rebalance_timeout_ms
        updated.topics = frozenset(subscription.topics or ())
        updated.regex = ""
        updated.client_id, updated.client_host = client_id, client_host
        updated.classic = ClassicProtocols(session_timeout_ms, tuple(protocols))
        owned = names_to_ids(getattr(subscription, "owned_partitions", None), self.topics)
        if old is not None and old.sync_ticket is not None:
            fx.reply(old.sync_ticket, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
        member = self.consumers.admit(fx, now, group, False, old, replaced, updated, owned)
        gid = group.group_id
        self.timers.cancel(("cg-join", gid, mid))
        # Kafka's classicGroupJoinToConsumerGroup, step 4: a classic member that replaced the
        # last consumer-protocol member (a static one, by its instance id) turns the group
        # classic, Stable at its epoch, with no rebalance.
        if replaced is None or not self.downgrade(fx, now, group, [], replacement=True):
            self.timers.schedule(
                ("cg-sync", gid, mid),
                now + max(member.rebalance_timeout_ms, 0),
                self._on_sync_timeout,
                (group, mid),
            )
        fx.reply(
            ticket,
            JoinOutcome(
                ErrorCode.NONE,
                generation_id=member.epoch,
                protocol_type=CONSUMER,
                protocol_name=protocols[0][0],
                leader_id="",
                member_id=mid,
            ),
        )
        return None

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                return None, ErrorCode.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        else:
            member = group.members.get(member_id)
        if member is None or not member.uses_classic:
            # A consumer-protocol member does not speak JoinGroup/SyncGroup/Heartbeat.
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        return member, ErrorCode.NONE

    def sync(
        self,
        fx: Effects,
        now: int,
        group: ConsumerGroup,
        *,
        ticket: Ticket,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> None:
        member, error = self._classic_member(group, member_id, group_instance_id)
        if member is None or not group.members:
            fx.reply(ticket, SyncOutcome(error or ErrorCode.UNKNOWN_MEMBER_ID))
            return
        assert member.classic is not None
        first = member.classic.protocols[0][0]
        if generation_id != member.epoch:
            fx.reply(ticket, SyncOutcome(ErrorCode.ILLEGAL_GENERATION))
            return
        if (protocol_type is not None and protocol_type != CONSUMER) or (
            protocol_name is not None and protocol_name != first
        ):
            fx.reply(ticket, SyncOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if (
            group.assignment_epoch > member.epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._ask_to_rejoin(group, member, now)
            fx.reply(ticket, SyncOutcome(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        self.timers.cancel(("cg-sync", group.group_id, member.member_id))
        self.consumers.schedule_session(group, member, now)
        fx.reply(
            ticket,
            SyncOutcome(
                ErrorCode.NONE,
                protocol_type=CONSUMER,
                protocol_name=first,
                assignment=assignment_bytes(member, member.assigned, self.topics),
            ),
        )

    def heartbeat(
        self, now: int, group: ConsumerGroup, member_id: str, generation_id: int,
        instance_id: str | None,
    ) -> ErrorCode:  # fmt: skip
        member, error = self._classic_member(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumers.schedule_session(group, member, now)
        waiting = member.state is MemberState.UNRELEASED_PARTITIONS and any(
            group.taken_by_other(member.member_id, t, p)
            for t, ps in group.target.get(member.member_id, {}).items()
            for p in ps
        )
        if (
            member.epoch < group.assignment_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting)
        ):
            self._ask_to_rejoin(group, member, now)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _ask_to_rejoin(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        key = ("cg-join", group.group_id, member.member_id)
        if key not in self.timers:
            self.timers.schedule(
                key,
                now + max(member.rebalance_timeout_ms, 0),
                self._on_join_timeout,
                (group, member.member_id),
            )

    def leave(
        self, fx: Effects, now: int, group: ConsumerGroup, leaving: list[tuple[str, str | None]]
    ) -> LeaveOutcome:
        outcomes = []
        gone: list[str] = []
        for member_id, instance_id in leaving:
            error = ErrorCode.NONE
            if instance_id is not None:
                member = group.static_member(instance_id)
                if member is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                elif member_id and member_id != member.member_id:
                    error = ErrorCode.FENCED_INSTANCE_ID
                else:
                    gone.append(member.member_id)
            elif member_id in group.members:
                gone.append(member_id)
            else:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            outcomes.append(LeaveMemberOutcome(member_id, instance_id, error))
        if gone:
            log.info("group %s: members %s left", group.group_id, ", ".join(gone))
            self.consumers.fence(fx, now, group, gone, "members left the group")
        return LeaveOutcome(ErrorCode.NONE, tuple(outcomes))

    def _on_sync_timeout(self, now: int, group: ConsumerGroup, member_id: str) -> Effects:
        fx = Effects()
        if self.consumers.groups.get(group.group_id) is group and member_id in group.members:
            log.info(
                "group %s: classic member %s failed to sync in time", group.group_id, member_id
            )
            self.consumers.fence(fx, now, group, [member_id], f"member {member_id} did not sync")
        return fx

    def _on_join_timeout(self, now: int, group: ConsumerGroup, member_id: str) -> Effects:
        fx = Effects()
        if self.consumers.groups.get(group.group_id) is group and member_id in group.members:
            log.info(
                "group %s: classic member %s failed to rejoin in time", group.group_id, member_id
            )
            self.consumers.fence(fx, now, group, [member_id], f"member {member_id} did not rejoin")
        return fx

    # -- downgrade: consumer -> classic -----------------------------------------------------

    def downgrade(
        self,
        fx: Effects,
        now: int,
        group: ConsumerGroup,
        leaving: list[str],
        replacement: bool = False,
    ) -> bool:
        """When the members that stay all speak the classic protocol, the group becomes a
        classic group again (records into `fx`); whether it did. After members left it
        rebalances; after a classic member took a static member's place (`replacement`) it
        stays Stable, the newcomer holding what the member it replaced was assigned."""
        remaining = [m for m in group.members.values() if m.member_id not in leaving]
        if (
            not remaining
            or any(not m.uses_classic for m in remaining)
            or not _policy_allows(self.policy, "downgrade")
            or len(remaining) > self.config.group_max_size
        ):
            return False
        targets.write_group_tombstones(fx, group)
        classic = Group(group.group_id, group.partition, now)
        classic.generation_id = group.epoch
        classic.protocol_type = CONSUMER
        for m in remaining:
            assert m.classic is not None
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocols=m.classic.protocols,
                last_heartbeat=now,
            )
            member.assignment = assignment_bytes(m, group.target.get(m.member_id, {}), self.topics)
            classic.add(member)
        classic.protocol_name = classic.select_protocol()
        # A conversion, not a transition: the classic group resumes Stable at the group epoch.
        classic.state = GroupState.STABLE
        for m in group.members.values():
            self.consumers.cancel_member_timers(group, m.member_id)
        self.classic.install(
            fx,
            now,
            classic,
            "the group converted back to the classic protocol",
            rebalance=not replacement,
        )
        log.info(
            "group %s: converted from consumer back to classic at generation %d with %d members%s",
            group.group_id,
            classic.generation_id,
            len(classic.members),
            " (a classic member replaced the last consumer-protocol one)" if replacement else "",
        )
        return True
