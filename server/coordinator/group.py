"""One classic group: its members, generation, chosen protocol, leader and state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeGuard

from minicoord.server.coordinator.member import Member, Protocols
from minicoord.server.coordinator.state import (
    COMPLETING_REBALANCE,
    EMPTY,
    STABLE,
    GroupState,
    check_transition,
)

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.group import ConsumerGroup


class Group:
    __slots__ = (
        "_awaiting_join",
        "_protocol_support",
        "generation_id",
        "group_id",
        "in_initial_delay",
        "in_log",
        "initial_delay_remaining_ms",
        "leader_id",
        "members",
        "new_member_added",
        "partition",
        "pending_members",
        "pending_sync",
        "protocol_name",
        "protocol_type",
        "rebalance_reason",
        "rebalance_started_at",
        "state",
        "state_timestamp",
        "static_members",
    )

    def __init__(self, group_id: str, partition: int, now: int) -> None:
        self.group_id = group_id
        self.partition = partition
        self.state = GroupState.EMPTY
        self.state_timestamp = now
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        # Insertion-ordered: leader re-election picks the oldest remaining member.
        self.members: dict[str, Member] = {}
        # Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet, each with
        # the time by which it must (its session timeout from the first JoinGroup).
        self.pending_members: dict[str, int] = {}
        # Members that got their JoinGroup answer but have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        self.static_members: dict[str, str] = {}
        # Whether a GroupMetadata value of it is in the log (written, or replayed): a group
        # that only ever stored offsets has none, and replaying the log makes it only from
        # offsets that survive.
        self.in_log = False
        # How many members support each protocol name: the candidates are those all support.
        # A plain dict, not a Counter: a dict subclass's reads and writes are slower, and
        # every member joining a crowd counts here.
        self._protocol_support: dict[str, int] = {}
        # group.initial.rebalance.delay.ms: while the first join phase of an empty group is
        # held open, new members extend it (up to the rebalance timeout) instead of it
        # completing as soon as everyone known has joined.
        self.in_initial_delay = False
        self.new_member_added = False
        self.initial_delay_remaining_ms = 0
        # When the rebalance under way began and why (its first cause), for the one log line
        # and the metrics each rebalance gets when it ends.
        self.rebalance_started_at: int | None = None
        self.rebalance_reason = ""
        # Kept as a count so that "has everyone rejoined?" is O(1) per JoinGroup.
        self._awaiting_join = 0

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
            f"members={len(self.members)})"
        )

    # -- state ----------------------------------------------------------------------------

    def transition(self, target: GroupState, now: int) -> None:
        check_transition(self.state, target)
        self.state = target
        self.state_timestamp = now

    @property
    def can_rebalance(self) -> bool:
        return self.state in (STABLE, COMPLETING_REBALANCE, EMPTY)

    # -- membership -----------------------------------------------------------------------

    def park_join(self, member: Member, ticket: object) -> None:
        if member.join_ticket is None:
            self._awaiting_join += 1
        member.join_ticket = ticket

    def take_join(self, member: Member) -> object:
        ticket = member.join_ticket
        if ticket is not None:
            self._awaiting_join -= 1
            member.join_ticket = None
        return ticket

    def add(self, member: Member, protocol_type: str | None = None) -> None:
        """Add `member`; the first member of an empty group sets the protocol type its
        JoinGroup named (members keep none of their own: it is always the group's)."""
        if member.join_ticket is not None:
            self._awaiting_join += 1
        if protocol_type is not None and not self.members:
            self.protocol_type = protocol_type
        self.members[member.member_id] = member
        self._support(1, member.protocol_names)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def drop_pending(self, member_id: str) -> bool:
        """Forget a pending (KIP-394) member; whether it was one."""
        if self.pending_members.pop(member_id, None) is None:
            return False
        if not self.pending_members:
            # A fresh dict: an emptied one keeps the table it grew to, per group for good.
            self.pending_members = {}
        return True

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._support(-1, member.protocol_names)
        if member.join_ticket is not None:
            self._awaiting_join -= 1
        self.pending_sync.discard(member_id)
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(
        self, member: Member, protocols: list[tuple[str, bytes]] | Protocols
    ) -> None:
        self._support(-1, member.protocol_names)
        member.update_protocols(protocols)
        self._support(1, member.protocol_names)

    def replace_static_member(self, old_id: str, new_member: Member) -> Member:
        """Give a static member's slot to a new member id, keeping its assignment and leadership."""
        old = self.members.pop(old_id)
        self._support(-1, old.protocol_names)
        if old.join_ticket is not None:
            self._awaiting_join -= 1
        if new_member.join_ticket is not None:
            self._awaiting_join += 1
        new_member.assignment = old.assignment
        self.members[new_member.member_id] = new_member
        self._support(1, new_member.protocol_names)
        assert new_member.group_instance_id is not None
        self.static_members[new_member.group_instance_id] = new_member.member_id
        if self.leader_id == old_id:
            self.leader_id = new_member.member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member.member_id)
        return old

    def _support(self, step: int, names: frozenset[str]) -> None:
        support = self._protocol_support
        for name in names:
            support[name] = support.get(name, 0) + step

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def awaiting_join(self) -> int:
        """How many members have a JoinGroup parked (Kafka's numAwaitingJoinResponse)."""
        return self._awaiting_join

    # -- protocols ------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._protocol_support.items() if count == n and n}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        n = len(self.members)
        support = self._protocol_support
        # A loop, not any() over a generator: every JoinGroup asks.
        for name in names:  # noqa: SIM110
            if support.get(name, 0) == n:
                return True
        return False

    def select_protocol(self) -> str:
        """The protocol chosen by vote: each member votes for its favourite candidate."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"no protocol common to all members of {self.group_id}")
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        # Kafka counts the votes in a Java HashMap and takes the first protocol with the most
        # in its iteration order, so a tie (a rolling change of assignors, members listing
        # "range" and "cooperative-sticky" in either order) goes the way Kafka's goes.
        return max(java_hash_map_order(list(votes)), key=votes.__getitem__)

    # -- rebalance bookkeeping ------------------------------------------------------------

    @property
    def rebalance_timeout_ms(self) -> int:
        """The group waits for the slowest member: the largest rebalance timeout among them."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and self._awaiting_join == len(self.members)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False


def java_hash_map_order(keys: list[str]) -> list[str]:
    """String keys in the order a java.util.HashMap holding them iterates, given the order
    they were put in: by bucket (String.hashCode spread as HashMap.hash does, over a table of
    16 slots doubled while more than 3/4 full), the keys of one bucket in insertion order."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        units = key.encode("utf-16-be")
        h = 0
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
        return (h ^ h >> 16) & (capacity - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: insertion order within a bucket


def is_consumer_group(group: Group | ConsumerGroup | None) -> TypeGuard[ConsumerGroup]:
    """Whether a group of the coordinator's one dict is a KIP-848 consumer group.

    Told by its not being classic, so that asking loads nothing: the consumer protocol's
    modules load with the first consumer group (GroupCoordinator.consumers).
    """
    return group is not None and type(group) is not Group
