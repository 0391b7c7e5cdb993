"""Reconciliation: how a member moves toward the group's target, one heartbeat at a time
(Kafka's CurrentAssignmentBuilder, with the 4.2 rules).

A pure function of the member's current assignment, its target, what it reports owning and
which partitions someone else still holds:
- Revocation comes first: a member with partitions to give up keeps its epoch and waits in
  UNREVOKED_PARTITIONS, given only what it keeps, until a heartbeat listing its owned
  partitions shows the revoked ones gone (a heartbeat that lists nothing counts as still
  owning them).
- A partition still held by another member is not handed over: the member takes the rest of
  its target, advances to the target epoch and waits in UNRELEASED_PARTITIONS; it gets the
  partition on a heartbeat after the owner released it.
- A subscription change that leaves the target as it is still drops the partitions of topics
  no longer subscribed (revoking them first if the member holds them).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.coordinator.consumer.group import Assignment, MemberState

Taken = Callable[[uuid.UUID, int], bool]


class UnknownMemberState(Exception):
    """A member in a state this coordinator does not know reports owning partitions."""


@dataclass(frozen=True, slots=True)
class Reconciled:
    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: Assignment
    pending: Assignment


def reconcile(
    current: Reconciled,
    target_epoch: int,
    target: Assignment,
    subscribed: frozenset[uuid.UUID],
    owned: Assignment | None,
    taken: Taken,
    subscription_changed: bool,
) -> Reconciled:
    state = current.state
    if state is MemberState.STABLE:
        if current.epoch != target_epoch:
            return _next(current, current.epoch, target_epoch, target, subscribed, owned, taken)
        if subscription_changed:
            return _drop_unsubscribed(current, subscribed, owned)
        return current
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.pending):
            if subscription_changed:
                return _drop_unsubscribed(current, subscribed, owned)
            return current
        return _next(current, current.epoch, target_epoch, target, subscribed, owned, taken)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(current, current.epoch, target_epoch, target, subscribed, owned, taken)
    if owned is None or any(owned.values()):
        raise UnknownMemberState
    return _next(current, target_epoch, target_epoch, target, subscribed, owned, taken)


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    if owned is None:
        return any(partitions.values())
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def _next(
    current: Reconciled,
    revoke_epoch: int,
    target_epoch: int,
    target: Assignment,
    subscribed: frozenset[uuid.UUID],
    owned: Assignment | None,
    taken: Taken,
) -> Reconciled:
    keep: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(current.assigned):
        wanted = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        held = current.assigned.get(topic, frozenset())
        kept = held & wanted
        if kept:
            keep[topic] = kept
        if held - kept:
            revoke[topic] = held - kept
        pending_here = current.pending.get(topic, frozenset())
        free = frozenset(p for p in wanted - kept if p in pending_here or not taken(topic, p))
        if len(free) < len(wanted - kept):
            unreleased = True
        if free:
            assign[topic] = free
    if revoke and _owns_any(owned, revoke):
        return Reconciled(
            revoke_epoch, current.epoch, MemberState.UNREVOKED_PARTITIONS, keep, revoke
        )
    if assign:
        merged = dict(keep)
        for topic, parts in assign.items():
            merged[topic] = merged.get(topic, frozenset()) | parts
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return Reconciled(target_epoch, current.epoch, state, merged, {})
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(target_epoch, current.epoch, state, keep, {})


def _drop_unsubscribed(
    current: Reconciled, subscribed: frozenset[uuid.UUID], owned: Assignment | None
) -> Reconciled:
    dropped = {t: ps for t, ps in current.assigned.items() if t not in subscribed}
    if not dropped:
        return current
    keep = {t: ps for t, ps in current.assigned.items() if t in subscribed}
    if _owns_any(owned, dropped):
        pending = dict(current.pending)
        for topic, parts in dropped.items():
            pending[topic] = pending.get(topic, frozenset()) | parts
        return Reconciled(
            current.epoch, current.epoch, MemberState.UNREVOKED_PARTITIONS, keep, pending
        )
    return Reconciled(current.epoch, current.epoch, current.state, keep, current.pending)
