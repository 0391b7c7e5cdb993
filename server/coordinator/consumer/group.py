"""A KIP-848 consumer group: its epochs, members, target assignment and partition owners.

Rules it keeps (Kafka's ConsumerGroup):
- The group epoch counts changes the members must follow (membership, subscriptions, the
  subscribed topics' metadata); the assignment epoch is the group epoch the target assignment
  was computed for. A member's epoch is the target epoch it has reconciled to.
- `owners` says which member holds each partition now (assigned or pending revocation),
  derived from the members' current assignments, never from targets: a partition is handed to
  a new member only once it has no owner (released by its previous one, or freed by a leave).
- The state is derived: Empty (no members), Assigning (the target is behind the group epoch,
  for at most group.consumer.assignment.interval.ms),
  Reconciling (some member is not stable at the assignment epoch), Stable.
"""

from __future__ import annotations

import uuid
from dataclasses import field, replace
from enum import Enum, IntEnum

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.coordinator.results import Ticket

Assignment = dict[uuid.UUID, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}
# Epochs a member may be at besides reconciled ones.
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(IntEnum):
    """The reconciliation state byte stored in CurrentMemberAssignment records."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ClassicProtocols:
    """What a classic member of a consumer group sent in its JoinGroup."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topics: frozenset[str] = frozenset()
    regex: str = ""  # "" for none
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicProtocols | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending: Assignment = field(default_factory=dict)
    # When the member was last heard from: its session runs from here (a field update per
    # heartbeat; the session timer reads it when it fires).
    last_seen: int = 0
    # Classic members only: their parked JoinGroup/SyncGroup replies.
    join_ticket: Ticket = None
    sync_ticket: Ticket = None

    @property
    def uses_classic(self) -> bool:
        return self.classic is not None

    def subscription(self) -> tuple[object, ...]:
        """What a MemberMetadata record holds: a change of any of it writes a new record."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.topics,
            self.regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
        )

    def reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.epoch == assignment_epoch

    def copy(self) -> ConsumerMember:
        return replace(self)


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


class ConsumerGroup:
    __slots__ = (
        "assignment_epoch",
        "assignment_timestamp",
        "epoch",
        "group_id",
        "legacy_partition_metadata",
        "members",
        "metadata_hash",
        "name_subscribers",
        "owners",
        "partition",
        "rebalance_reason",
        "rebalance_started_at",
        "refresh",
        "regex_refresh",
        "regex_subscribers",
        "regexes",
        "static_members",
        "target",
    )

    def __init__(self, group_id: str, partition: int) -> None:
        self.group_id = group_id
        self.partition = partition
        self.epoch = 0
        self.assignment_epoch = 0
        # When the target was last computed (0: never, or reset): recomputations are batched
        # to one per group.consumer.assignment.interval.ms (KIP-1263).
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        self.regexes: dict[str, ResolvedRegex] = {}
        # How many members subscribe to each topic name and each regex, kept by put/remove so
        # that the group's subscription is known without walking its members (a thousand
        # members fenced at once would otherwise cost a million steps).
        self.name_subscribers: dict[str, int] = {}
        self.regex_subscribers: dict[str, int] = {}
        # The subscribed topics' metadata may have changed: the next heartbeat recomputes the
        # metadata hash (and bumps the epoch if it differs). Set at load and on topic events.
        self.refresh = True
        # Topics were created (or the group was loaded): its regexes are resolved again by the
        # next ConsumerGroupHeartbeat, as Kafka's are, with what that member may describe.
        self.regex_refresh = True
        # A group loaded from Kafka 4.0's records has a partition metadata record to tombstone.
        self.legacy_partition_metadata = False
        # When the rebalance under way began and why, for the rebalance log line and metrics.
        self.rebalance_started_at: int | None = None
        self.rebalance_reason = ""

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.epoch}, "
            f"assignment={self.assignment_epoch}, members={len(self.members)})"
        )

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def size(self) -> int:
        return len(self.members)

    # -- members --------------------------------------------------------------------------

    def put(self, member: ConsumerMember) -> None:
        """Add a member or replace its previous version, keeping owners and static ids true."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            self._unsubscribe(old)
            instance = old.instance_id
            if instance is not None and self.static_members.get(instance) == old.member_id:
                del self.static_members[instance]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold(member)
        self._subscribe(member)

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        self._unsubscribe(member)
        instance = member.instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        self.target.pop(member_id, None)
        return member

    def _subscribe(self, member: ConsumerMember) -> None:
        names = self.name_subscribers
        for name in member.topics:
            names[name] = names.get(name, 0) + 1
        if member.regex:
            self.regex_subscribers[member.regex] = self.regex_subscribers.get(member.regex, 0) + 1

    def _unsubscribe(self, member: ConsumerMember) -> None:
        names = self.name_subscribers
        for name in member.topics:
            left = names[name] - 1
            if left:
                names[name] = left
            else:
                del names[name]
        if member.regex:
            left = self.regex_subscribers[member.regex] - 1
            if left:
                self.regex_subscribers[member.regex] = left
            else:
                del self.regex_subscribers[member.regex]

    def _hold(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending):
            for topic, parts in assignment.items():
                for p in parts:
                    self.owners[(topic, p)] = member.member_id

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending):
            for topic, parts in assignment.items():
                for p in parts:
                    if self.owners.get((topic, p)) == member.member_id:
                        del self.owners[(topic, p)]

    def taken_by_other(self, member_id: str, topic: uuid.UUID, partition: int) -> bool:
        owner = self.owners.get((topic, partition))
        return owner is not None and owner != member_id

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    # -- subscriptions --------------------------------------------------------------------

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        """The topic names a member subscribes to: by name, and by its resolved regex."""
        if not member.regex:
            return member.topics
        resolved = self.regexes.get(member.regex)
        return member.topics | resolved.topics if resolved else member.topics

    def subscribed_topics(self) -> set[str]:
        out = set(self.name_subscribers)
        for regex in self.regex_subscribers:
            resolved = self.regexes.get(regex)
            if resolved is not None:
                out |= resolved.topics
        return out

    def regex_users(self, regex: str) -> int:
        return self.regex_subscribers.get(regex, 0)
