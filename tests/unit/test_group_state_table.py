"""The classic group state table: every legal transition reached by a real flow, every other
one refused with IllegalStateTransition."""

from __future__ import annotations

import itertools

import pytest
from helpers_coordinator import GROUP, Harness
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.state import (
    VALID_PREVIOUS,
    GroupState,
    IllegalStateTransition,
    check_transition,
)

E = GroupState.EMPTY
P = GroupState.PREPARING_REBALANCE
C = GroupState.COMPLETING_REBALANCE
S = GroupState.STABLE
D = GroupState.DEAD

# Kafka's ClassicGroupState: each state with the states it may be entered from.
KAFKA_TABLE = {
    E: {P},
    P: {S, C, E},
    C: {P},
    S: {C},
    D: {S, P, C, E, D},
}
LEGAL = {(src, dst) for dst, sources in KAFKA_TABLE.items() for src in sources}
ALL_PAIRS = list(itertools.product(GroupState, repeat=2))


def test_table_is_kafkas() -> None:
    assert {dst: set(src) for dst, src in VALID_PREVIOUS.items()} == KAFKA_TABLE


def test_state_names_are_the_ones_kafka_reports() -> None:
    assert [s.value for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


@pytest.mark.parametrize(
    ("src", "dst"), sorted(LEGAL, key=lambda p: (p[0].value, p[1].value)), ids=str
)
def test_legal_transition_is_accepted(src: GroupState, dst: GroupState) -> None:
    check_transition(src, dst)
    group = Group("g", 0, now=0)
    group.state = src
    group.transition(dst, now=42)
    assert group.state is dst
    assert group.state_timestamp == 42


@pytest.mark.parametrize(
    ("src", "dst"),
    [p for p in ALL_PAIRS if p not in LEGAL],
    ids=lambda s: s.value,
)
def test_illegal_transition_raises(src: GroupState, dst: GroupState) -> None:
    with pytest.raises(IllegalStateTransition, match=f"{src.value} -> {dst.value}"):
        check_transition(src, dst)
    group = Group("g", 0, now=7)
    group.state = src
    with pytest.raises(IllegalStateTransition):
        group.transition(dst, now=99)
    # A refused transition changes nothing.
    assert group.state is src
    assert group.state_timestamp == 7


def test_illegal_transitions_are_exactly_the_complement() -> None:
    illegal = [p for p in ALL_PAIRS if p not in LEGAL]
    assert len(LEGAL) == 11
    assert len(illegal) == 14
    # Nothing leaves Dead except Dead itself.
    assert all((D, dst) not in LEGAL for dst in GroupState if dst is not D)


@pytest.fixture
def transitions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every state change the coordinator makes, as (from, to) names."""
    seen: list[tuple[str, str]] = []
    original = Group.transition

    def spy(self: Group, target: GroupState, now: int) -> None:
        before = self.state
        original(self, target, now)
        seen.append((before.value, target.value))

    monkeypatch.setattr(Group, "transition", spy)
    return seen


def test_legal_transitions_through_real_flows(transitions: list[tuple[str, str]]) -> None:
    h = Harness()
    # Empty -> PreparingRebalance -> CompletingRebalance -> Stable.
    a, b = h.form_group(0, 2)
    assert transitions == [
        ("Empty", "PreparingRebalance"),
        ("PreparingRebalance", "CompletingRebalance"),
        ("CompletingRebalance", "Stable"),
    ]
    transitions.clear()

    # Stable -> PreparingRebalance: the leader rejoins.
    ta = h.join(100, a)
    assert transitions == [("Stable", "PreparingRebalance")]
    tb = h.join(100, b)
    assert h.reply(ta).generation_id == h.reply(tb).generation_id == 2
    assert transitions[-1] == ("PreparingRebalance", "CompletingRebalance")
    transitions.clear()

    # CompletingRebalance -> PreparingRebalance: a member leaves before the leader syncs;
    # the group then waits for the remaining member to rejoin.
    h.leave(200, (b, None))
    assert transitions == [("CompletingRebalance", "PreparingRebalance")]
    assert h.state() == "PreparingRebalance"
    transitions.clear()

    # PreparingRebalance -> Empty: the last member leaves while the group waits for it.
    h.leave(300, (a, None))
    assert transitions == [("PreparingRebalance", "Empty")]
    assert h.group().generation_id == 3
    transitions.clear()

    # Empty -> Dead: the group is deleted.
    assert h.absorb(h.coordinator.delete_groups(400, [GROUP])).value == [0]
    assert transitions == [("Empty", "Dead")]


def test_stable_to_empty_passes_through_preparing(transitions: list[tuple[str, str]]) -> None:
    h = Harness()
    a, b = h.form_group(0, 2)
    transitions.clear()
    h.leave(100, (a, None), (b, None))
    assert transitions == [("Stable", "PreparingRebalance"), ("PreparingRebalance", "Empty")]
    assert h.state() == "Empty"
    assert h.group().generation_id == 2


def test_every_reachable_transition_is_legal(transitions: list[tuple[str, str]]) -> None:
    """A busier run: whatever the coordinator does, it only takes legal steps."""
    h = Harness()
    a, b, _c = h.form_group(0, 3)
    h.join(1_000, a)
    h.join(1_000, b)
    h.advance(40_000)  # c never rejoined: removed at the rebalance timeout
    h.advance(80_000)  # nobody synced generation 2: removed at the sync deadline
    assert h.state() == "Empty"
    names = {s.value: s for s in GroupState}
    assert transitions
    assert all((names[src], names[dst]) in LEGAL for src, dst in transitions)
