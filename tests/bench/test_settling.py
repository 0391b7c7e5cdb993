"""settling.py's rule for consumer-protocol members, with a describer that answers what a
test says (no server: the race it guards against needs an answer held in flight)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from minicoord.bench.settling import Settling
from minicoord.clients.consumer_member import GroupSnapshot

TOPIC = uuid.uuid4()


@dataclass
class FakeMember:
    member_id: str
    generation: int
    owned_ids: dict[uuid.UUID, list[int]]
    changed_at: float
    group_id: str = "g"
    rounds: int = 1
    group_size: int = 0


@dataclass(eq=False)
class FakeSim:
    member: FakeMember


@dataclass
class FakeDescriber:
    snapshot: GroupSnapshot
    polls: int = 0
    asked: list[str] = field(default_factory=list)

    async def describe(self, group_id: str) -> GroupSnapshot:
        self.asked.append(group_id)
        return self.snapshot


def snapshot(epoch: int, by_member: dict[str, set[int]]) -> GroupSnapshot:
    owned = tuple((TOPIC, p) for ps in by_member.values() for p in sorted(ps))
    return GroupSnapshot(
        error=0,
        state="Stable",
        epoch=epoch,
        assignment_epoch=epoch,
        member_epochs=tuple(epoch for _ in by_member),
        owned=owned,
        by_member=tuple((m, frozenset((TOPIC, p) for p in ps)) for m, ps in by_member.items()),
    )


async def test_a_member_at_the_epoch_is_settled_only_once_it_holds_what_the_server_gave() -> None:
    # a waited at epoch 2 for partition 1, which b released; the server has given it, but
    # the answer that carries it has not reached a yet.
    a = FakeMember("a", 2, {TOPIC: [0]}, changed_at=1.0)
    b = FakeMember("b", 2, {TOPIC: [2, 3]}, changed_at=1.5)
    describer = FakeDescriber(snapshot(2, {"a": {0, 1}, "b": {2, 3}}))
    settled: dict[str, float] = {}
    sims: list[Any] = [FakeSim(a), FakeSim(b)]

    def on_settled(sim: Any, t: float) -> None:
        settled[sim.member.member_id] = t

    watch = Settling(sims, "consumer", lambda _s: 2, 4, describer, on_settled)  # type: ignore[arg-type]
    await watch._check("g", sims)
    assert settled == {"b": 1.5} and not watch.done.is_set()
    # The answer arrives: a holds both, from the instant it took them.
    a.owned_ids, a.changed_at = {TOPIC: [0, 1]}, 2.5
    await watch._check("g", [sims[0]])
    assert settled == {"b": 1.5, "a": 2.5} and watch.done.is_set()
    assert a.group_size == 2


async def test_nothing_is_settled_while_a_partition_is_unowned() -> None:
    a = FakeMember("a", 2, {TOPIC: [0]}, changed_at=1.0)
    describer = FakeDescriber(snapshot(2, {"a": {0}}))
    settled: list[Any] = []
    sims: list[Any] = [FakeSim(a)]
    watch = Settling(sims, "consumer", lambda _s: 1, 2, describer, lambda s, t: settled.append(s))  # type: ignore[arg-type]
    await watch._check("g", sims)
    assert settled == [] and describer.asked == ["g"]
