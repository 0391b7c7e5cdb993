"""Classic group states and the table of legal transitions (Kafka's ClassicGroupState)."""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    # Value is the name DescribeGroups and ListGroups report.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# The states as module names, for the paths that run per request (Heartbeat, JoinGroup,
# SyncGroup): on Python 3.11 `GroupState.X` read in a function goes through the slow
# attribute hook EnumType.__getattr__ installs, ~170 ns against ~25 ns for a global name
# (3.12 dropped the hook). A heartbeat asked for four of them.
EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


# Each state with the states it may be entered from.
#   Empty: the last member left or expired during a rebalance.
#   PreparingRebalance: a member joined, left, expired or changed its metadata.
#   CompletingRebalance: every member rejoined (or the join deadline passed); awaiting the
#     leader's assignment.
#   Stable: the leader's SyncGroup delivered the assignment.
#   Dead: the group was deleted or its offsets partition unloaded; nothing leaves Dead.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    pass


def check_transition(current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(f"{current.value} -> {target.value}")
