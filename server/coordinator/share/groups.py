"""Share groups (KIP-932): membership and assignment, as Kafka 4.2's GroupMetadataManager
runs them for ShareGroupHeartbeat.

A member names itself (the client generates its id), joins with epoch 0 and a subscription,
heartbeats with the epoch it was last given, and leaves with -1. The group epoch rises when a
member joins, leaves, changes its subscription, or the subscribed topics' partitions change;
the target assignment is then computed again, and each member takes the group's epoch and its
new partitions at its next heartbeat. Share groups have no revocation step: partitions move at
once, since any number of members may fetch from one partition (the share partitions decide
who gets which record).

The assignor is Kafka's `simple` one in its counts: with no more members than partitions each
partition goes to one member, each member getting as many as the others or one more; with more
members, every partition is shared by ceil(members / partitions) of them. Kafka also keeps
assignments where it can (sticky); this one is recomputed from the sorted members and
partitions.

Differences from Kafka, chosen for tests: a joining member gets its partitions in its first
answer (Kafka initializes the partitions' share state first and hands them out one heartbeat
later, 5 s by default), and the heartbeat interval and session timeout default to 0.5 s and
10 s (group.share.*, as the consumer groups' quick defaults). Groups live in memory: a restart
forgets them; a member heartbeating to a group this node does not know is UNKNOWN_MEMBER_ID
(Kafka: GROUP_ID_NOT_FOUND, fatal to librdkafka), so that members rejoin after a restart.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.results import Effects
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")

EMPTY, STABLE = "Empty", "Stable"
ASSIGNOR = "simple"
# Kafka's member id rule (KafkaApis.isMemberIdValid): a Uuid's text, 22 characters, or
# anything else up to 36.
MAX_MEMBER_ID = 36

Assignment = dict[uuid.UUID, tuple[int, ...]]


class ShareGroupError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


def _unknown_member(group_id: str, member_id: str) -> ShareGroupError:
    return ShareGroupError(
        ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
    )


class ShareMember:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "deadline",
        "epoch",
        "member_id",
        "previous_epoch",
        "rack_id",
        "sent",
        "subscribed",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.previous_epoch = -1
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.subscribed: tuple[str, ...] = ()
        self.assignment: Assignment = {}
        # The assignment last answered with (None: none yet).
        self.sent: Assignment | None = None
        # When its session ends without another heartbeat.
        self.deadline = 0


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        # The partitions the target was computed over: {topic id: partition count}.
        self.topic_partitions: dict[uuid.UUID, int] = {}

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY


class HeartbeatOutcome:
    """An accepted heartbeat's answer (a refused one is a ShareGroupError)."""

    __slots__ = ("assignment", "epoch", "interval_ms", "member_id")

    def __init__(
        self, member_id: str, epoch: int, interval_ms: int, assignment: Assignment | None
    ) -> None:
        self.member_id = member_id
        self.epoch = epoch
        self.interval_ms = interval_ms
        self.assignment = assignment


class ShareGroups:
    """Every share group of this coordinator."""

    def __init__(
        self,
        config: Config,
        timers: TimerQueue,
        topics: Any,
        other_group: Callable[[str], bool],
        session_overrides: dict[str, int],
        interval_overrides: dict[str, int],
    ) -> None:
        self.config = config
        self.timers = timers
        self.topics = topics
        # Whether a classic or consumer group holds this id: one id, one group.
        self.other_group = other_group
        self.session_overrides = session_overrides
        self.interval_overrides = interval_overrides
        self.groups: dict[str, ShareGroup] = {}
        # Told of each group deleted (its share partitions go with it).
        self.on_deleted: Callable[[str], None] | None = None

    def interval_ms(self, group_id: str) -> int:
        return self.interval_overrides.get(group_id, self.config.group_share_heartbeat_interval_ms)

    def session_ms(self, group_id: str) -> int:
        return self.session_overrides.get(group_id, self.config.group_share_session_timeout_ms)

    # -- ShareGroupHeartbeat --------------------------------------------------------------

    def heartbeat(
        self,
        now: int,
        group_id: str,
        member_id: str,
        epoch: int,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatOutcome:
        """A ShareGroupHeartbeat's answer; ShareGroupError, with nothing changed, when it is
        refused."""
        invalid = ErrorCode.INVALID_REQUEST
        # GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid, in its order.
        if not member_id.strip() or len(member_id) > MAX_MEMBER_ID:
            raise ShareGroupError(invalid, "Invalid member id in the request.")
        if not group_id.strip():
            raise ShareGroupError(invalid, "GroupId can't be empty.")
        if rack_id is not None and not rack_id.strip():
            raise ShareGroupError(invalid, "RackId can't be empty.")
        if epoch == 0 and not topics:
            raise ShareGroupError(invalid, "SubscribedTopicNames must be set in first request.")
        if epoch < -1:
            raise ShareGroupError(invalid, "MemberEpoch is invalid.")
        if self.other_group(group_id):
            raise ShareGroupError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        group = self.groups.get(group_id)
        if epoch == -1:
            return self._leave(group_id, group, member_id)
        if group is None:
            if epoch != 0:
                # Kafka answers GROUP_ID_NOT_FOUND, which librdkafka takes as fatal. There
                # the group outlives a restart; here it does not (groups live in memory), so
                # its members are told what rejoins them: they are not members.
                raise _unknown_member(group_id, member_id)
            group = ShareGroup(group_id)
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise _unknown_member(group_id, member_id)
            if len(group.members) >= self.config.group_share_max_size:
                raise ShareGroupError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of "
                    f"{self.config.group_share_max_size} members.",
                )
            member = ShareMember(member_id)
        elif epoch not in (0, member.epoch, member.previous_epoch):
            raise ShareGroupError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.epoch})."
                if epoch < member.epoch
                else f"The share group member has a greater member epoch ({epoch}) than the "
                f"one known by the group coordinator ({member.epoch}).",
            )
        # Checked: the heartbeat applies from here on.
        self.groups[group_id] = group
        changed = member_id not in group.members
        group.members[member_id] = member
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if topics is not None and tuple(sorted(set(topics))) != member.subscribed:
            member.subscribed = tuple(sorted(set(topics)))
            changed = True
        if changed or self._partitions_of(group) != group.topic_partitions:
            self._new_target(group)
            if changed:
                log.info(
                    "share group %s: epoch %d with %d members",
                    group_id,
                    group.epoch,
                    len(group.members),
                )
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        # One timer per group at its members' earliest deadline (as consumer groups'
        # sessions): a heartbeat moves its member's deadline on and, nearly always, finds the
        # timer armed earlier already, so it costs no timer operation.
        member.deadline = now + self.session_ms(group_id)
        self.timers.schedule_by(
            ("share-sessions", group_id), member.deadline, self._on_sessions_due, (group_id,)
        )
        full = epoch == 0 or topics is not None
        assignment = None
        if full or member.sent != member.assignment:
            assignment = member.sent = dict(member.assignment)
        return HeartbeatOutcome(member_id, member.epoch, self.interval_ms(group_id), assignment)

    def _leave(self, group_id: str, group: ShareGroup | None, member_id: str) -> HeartbeatOutcome:
        if group is None:
            raise ShareGroupError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found."
            )
        if member_id not in group.members:
            raise _unknown_member(group_id, member_id)
        self._remove(group, member_id, "left the group")
        return HeartbeatOutcome(member_id, -1, 0, None)

    def _on_sessions_due(self, now: int, group_id: str) -> Effects:
        group = self.groups.get(group_id)
        if group is not None:
            for member in [m for m in group.members.values() if m.deadline <= now]:
                self._remove(group, member.member_id, "session timed out")
            if group.members:
                self.timers.schedule(
                    ("share-sessions", group_id),
                    min(m.deadline for m in group.members.values()),
                    self._on_sessions_due,
                    (group_id,),
                )
        return Effects()

    def _remove(self, group: ShareGroup, member_id: str, why: str) -> None:
        del group.members[member_id]
        if not group.members:
            self.timers.cancel(("share-sessions", group.group_id))
        log.info("share group %s: member %s %s", group.group_id, member_id, why)
        self._new_target(group)

    # -- assignment -----------------------------------------------------------------------

    def _partitions_of(self, group: ShareGroup) -> dict[uuid.UUID, int]:
        """{topic id: partitions} of the topics the members subscribe to that exist."""
        out = {}
        for name in {name for m in group.members.values() for name in m.subscribed}:
            topic = self.topics.get(name)
            if topic is not None:
                out[topic.topic_id] = topic.partitions
        return out

    def _new_target(self, group: ShareGroup) -> None:
        group.epoch += 1
        group.topic_partitions = self._partitions_of(group)
        members = sorted(group.members.values(), key=lambda m: m.member_id)
        for member in members:
            member.assignment = {}
        # The simple assignor per subscription: members with the same topics share them.
        by_subscription: dict[tuple[str, ...], list[ShareMember]] = {}
        for member in members:
            by_subscription.setdefault(member.subscribed, []).append(member)
        for subscribed, subscribers in by_subscription.items():
            partitions = []
            for name in subscribed:
                topic = self.topics.get(name)
                if topic is not None:
                    partitions += [(topic.topic_id, p) for p in range(topic.partitions)]
            partitions.sort()
            for member, owned in zip(
                subscribers, simple_assign(len(subscribers), partitions), strict=True
            ):
                for topic_id, p in owned:
                    member.assignment.setdefault(topic_id, ())
                    member.assignment[topic_id] += (p,)
        group.assignment_epoch = group.epoch

    # -- describing and deleting ----------------------------------------------------------

    def empty_group(self, group_id: str, create: bool) -> tuple[ErrorCode, str | None]:
        """Whether the offsets admin APIs may change the group's share state: it must be a
        share group without members (made, empty, when `create` and there is none)."""
        if self.other_group(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            self.groups[group_id] = ShareGroup(group_id)
        elif group.members:
            return ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not EMPTY."
        return ErrorCode.NONE, None

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        if self.on_deleted is not None:
            self.on_deleted(group_id)
        return ErrorCode.NONE

    def on_topics_changed(self) -> None:
        """Topics were made, deleted or grew: groups whose partitions changed get a new
        target at once (their members learn it at their next heartbeat)."""
        for group in self.groups.values():
            if group.members and self._partitions_of(group) != group.topic_partitions:
                self._new_target(group)


def simple_assign(members: int, partitions: list[Any]) -> list[list[Any]]:
    """Kafka's simple assignor's counts: each partition shared by ceil(M/P) members, member i
    of M taking ceil(x(i+1)) - ceil(xi) of the P * ceil(M/P) slots (x = slots / M), the slots
    dealt round by round so that no member gets a partition twice."""
    if not members or not partitions:
        return [[] for _ in range(members)]
    sharing = -(-members // len(partitions))
    slots = [p for _ in range(sharing) for p in partitions]
    total = len(slots)
    # ceil(total * i / members), in integers.
    bounds = [-(-total * i // members) for i in range(members + 1)]
    return [slots[bounds[i] : bounds[i + 1]] for i in range(members)]
