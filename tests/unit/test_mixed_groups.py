"""Mixed groups on a manual clock: a classic group upgraded by its first consumer-protocol
member, classic members living in a consumer group (JoinGroup/SyncGroup/Heartbeat answered
from the server-side assignment), and the way back to a classic group when the last
consumer-protocol member leaves, as Kafka's GroupMetadataManager does it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from consumer_helpers import CONFIG, GROUP, Harness
from helpers_coordinator import subscription
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer.group import ConsumerGroup
from minicoord.server.coordinator.consumer.requests import new_member_id
from minicoord.server.coordinator.group import Group
from minicoord.server.coordinator.state import GroupState

E = ErrorCode
SESSION = 10_000


class Mixed(Harness):
    """Classic members (JoinGroup/SyncGroup/Heartbeat) beside consumer-protocol ones."""

    def __init__(self, config: Config = CONFIG) -> None:
        super().__init__(config, foo=6)
        self._tickets = itertools.count(1)
        # classic member id -> (generation, assigned partitions of foo)
        self.classic: dict[str, tuple[int, list[int]]] = {}

    def join(
        self, member_id: str = "", *, protocols: Any = None, instance: str | None = None
    ) -> Any:
        ticket = next(self._tickets)
        self.absorb(
            self.coordinator.join_group(
                self.now,
                ticket,
                group_id=GROUP,
                member_id=member_id,
                group_instance_id=instance,
                client_id="classic",
                client_host="/127.0.0.1",
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=protocols or [("range", subscription("foo"))],
                require_known_member_id=True,
            )
        )
        return self.replies.pop(ticket, None)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes],
        instance: str | None = None,
    ) -> Any:
        ticket = next(self._tickets)
        self.absorb(
            self.coordinator.sync_group(
                self.now,
                ticket,
                group_id=GROUP,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            )
        )
        return self.replies.pop(ticket, None)

    def rejoin_and_sync(self, member_id: str) -> None:
        """What a classic consumer does when told to rejoin inside a consumer group."""
        joined = self.join(member_id)
        assert joined is not None and joined.error is E.NONE, joined
        # No leader inside a consumer group: the server assigns.
        assert joined.leader_id == "" and joined.members == ()
        synced = self.sync(member_id, joined.generation_id, {})
        assert synced is not None and synced.error is E.NONE, synced
        self.classic[member_id] = (joined.generation_id, _partitions(synced.assignment))

    def beat_classic(self, member_id: str) -> ErrorCode:
        generation, _ = self.classic[member_id]
        return self.coordinator.heartbeat(self.now, GROUP, member_id, generation)


def _partitions(assignment: bytes) -> list[int]:
    decoded = ConsumerProtocolAssignment.decode(assignment)
    return sorted(p for topic, parts in decoded.assigned_partitions for p in parts)


def classic_group(h: Mixed, members: int) -> list[str]:
    """A Stable classic group of `members`, the leader assigning foo's partitions by range."""
    ids = []
    for _ in range(members):
        first = h.join()
        assert first.error is E.MEMBER_ID_REQUIRED
        ids.append(first.member_id)
    tickets = {}
    for mid in ids:
        ticket = next(h._tickets)
        tickets[mid] = ticket
        h.absorb(
            h.coordinator.join_group(
                h.now,
                ticket,
                group_id=GROUP,
                member_id=mid,
                group_instance_id=None,
                client_id="classic",
                client_host="/127.0.0.1",
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=[("range", subscription("foo"))],
                require_known_member_id=True,
            )
        )
    h.tick(3_000)  # the initial rebalance delay
    joined = {mid: h.replies.pop(t) for mid, t in tickets.items()}
    generation = next(iter(joined.values())).generation_id
    leader = next(o for o in joined.values() if o.members).member_id
    per = 6 // members
    plan = {
        mid: bytes(
            ConsumerProtocolAssignment(
                assigned_partitions=[("foo", list(range(i * per, (i + 1) * per)))], user_data=None
            ).encode(version=0)
        )
        for i, mid in enumerate(ids)
    }
    for mid in ids:
        synced = h.sync(mid, generation, plan if mid == leader else {})
        assert synced.error is E.NONE
        h.classic[mid] = (generation, _partitions(synced.assignment))
    assert isinstance(h.group(), Group) and h.group().state is GroupState.STABLE
    return ids


def owned_everywhere(h: Mixed, consumers: dict[str, tuple[int, dict[str, list[int]]]]) -> list[int]:
    """Every partition as the members themselves believe they own it (classic + consumer)."""
    out = [p for _, parts in h.classic.values() for p in parts]
    out += [p for _, owned in consumers.values() for p in owned.get("foo", [])]
    return sorted(out)


def converge(h: Mixed, consumers: dict[str, tuple[int, dict[str, list[int]]]]) -> None:
    """Everyone heartbeats (classic members rejoin when told) until the group is Stable; no
    partition is ever believed owned by two members on the way."""
    for _ in range(12):
        h.tick(100)
        for mid in list(h.classic):
            if h.beat_classic(mid) is E.REBALANCE_IN_PROGRESS:
                h.rejoin_and_sync(mid)
        for mid, (epoch, owned) in list(consumers.items()):
            out = h.hb(mid, epoch, owned=owned)
            assert out.error is E.NONE, out
            consumers[mid] = (out.member_epoch, h.owned(out) if out.assignment else owned)
        believed = owned_everywhere(h, consumers)
        assert len(believed) == len(set(believed)), f"a partition owned twice: {believed}"
        group = h.group()
        if isinstance(group, ConsumerGroup) and group.state.value == "Stable":
            return
    raise AssertionError(f"not stable: {h.group()}")


def test_a_consumer_member_upgrades_a_classic_group_keeping_what_members_own() -> None:
    h = Mixed()
    classic_ids = classic_group(h, 2)
    generation = h.classic[classic_ids[0]][0]
    newcomer = new_member_id()
    out = h.hb(newcomer, 0)
    assert out.error is E.NONE, out
    group = h.group()
    assert isinstance(group, ConsumerGroup)
    # The classic generation carries on as the group epoch; the newcomer bumps it once.
    assert group.epoch == generation + 1
    for mid in classic_ids:
        member = group.members[mid]
        assert member.uses_classic and member.epoch == generation
        assert sorted(p for ps in member.assigned.values() for p in ps) == h.classic[mid][1]
    consumers = {newcomer: (out.member_epoch, h.owned(out))}
    converge(h, consumers)
    final = owned_everywhere(h, consumers)
    assert final == list(range(6))  # complete and disjoint
    assert len(consumers[newcomer][1]["foo"]) == 2
    assert all(len(parts) == 2 for _, parts in h.classic.values())
    # The classic group's record was replaced by the consumer group's.
    assert any(partition == group.partition for partition, _ in h.records)


def test_a_classic_member_joins_a_consumer_group_and_is_assigned_by_the_server() -> None:
    h = Mixed()
    state = h.join_all(["a", "b"])
    consumers = {m: state[m] for m in state}
    first = h.join()
    assert first.error is E.MEMBER_ID_REQUIRED
    mid = first.member_id
    # Answered at once (no join phase to wait for), as Kafka does for a consumer group.
    h.rejoin_and_sync(mid)
    assert h.group().members[mid].uses_classic
    converge(h, consumers)
    assert owned_everywhere(h, consumers) == list(range(6))
    assert all(len(owned["foo"]) == 2 for _, owned in consumers.values())


def test_the_last_consumer_member_leaving_turns_the_group_classic_again() -> None:
    h = Mixed()
    classic_ids = classic_group(h, 2)
    newcomer = new_member_id()
    out = h.hb(newcomer, 0)
    consumers = {newcomer: (out.member_epoch, h.owned(out))}
    converge(h, consumers)
    epoch = h.group().epoch
    assert h.hb(newcomer, -1).error is E.NONE
    group = h.group()
    assert isinstance(group, Group), group
    assert set(group.members) == set(classic_ids)
    # It resumes at the group epoch and rebalances once, as a classic group does.
    assert group.generation_id == epoch and group.state is GroupState.PREPARING_REBALANCE
    assert all(h.beat_classic(mid) is E.REBALANCE_IN_PROGRESS for mid in classic_ids)
    tickets = {}
    for mid in classic_ids:
        tickets[mid] = next(h._tickets)
        h.absorb(
            h.coordinator.join_group(
                h.now,
                tickets[mid],
                group_id=GROUP,
                member_id=mid,
                group_instance_id=None,
                client_id="classic",
                client_host="/127.0.0.1",
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=[("range", subscription("foo"))],
                require_known_member_id=True,
            )
        )
    joined = {mid: h.replies.pop(t) for mid, t in tickets.items()}
    assert {o.generation_id for o in joined.values()} == {epoch + 1}
    assert sum(1 for o in joined.values() if o.members) == 1  # a leader again
    assert group.state is GroupState.COMPLETING_REBALANCE


@pytest.mark.parametrize("interval_ms", [0, 1_000])
def test_classic_members_left_alone_in_a_consumer_group_take_over_a_leavers_partitions(
    interval_ms: int,
) -> None:
    # Policy `upgrade`: the last consumer-protocol member leaving does not turn the group
    # classic, and no consumer-protocol heartbeat is left to compute the new target. Kafka's
    # classic heartbeat then answers REBALANCE_IN_PROGRESS; here the target is computed (or,
    # batched, timed) when the member goes, and the classic members are told to rejoin.
    config = Config(
        group_consumer_migration_policy="upgrade",
        group_consumer_assignment_interval_ms=interval_ms,
        group_min_session_timeout_ms=1000,
    )
    h = Mixed(config)
    classic_ids = classic_group(h, 2)
    newcomer = new_member_id()
    out = h.hb(newcomer, 0)
    consumers = {newcomer: (out.member_epoch, h.owned(out))}
    converge(h, consumers)
    assert len(consumers[newcomer][1]["foo"]) == 2
    assert h.hb(newcomer, -1).error is E.NONE
    assert isinstance(h.group(), ConsumerGroup)  # the way back to classic is refused
    told = set()
    for _ in range(30):
        h.tick(100)
        for mid in classic_ids:
            if h.beat_classic(mid) is E.REBALANCE_IN_PROGRESS:
                told.add(mid)
                h.rejoin_and_sync(mid)
        if owned_everywhere(h, {}) == list(range(6)):
            break
    assert told == set(classic_ids)
    assert owned_everywhere(h, {}) == list(range(6))
    assert h.group().state.value == "Stable"


def test_policies_refuse_the_conversions_they_forbid() -> None:
    h = Mixed(Config(group_consumer_migration_policy="downgrade"))
    classic_group(h, 2)
    out = h.hb(new_member_id(), 0)
    assert out.error is E.GROUP_ID_NOT_FOUND
    assert out.message and "online upgrade is disabled" in out.message
    assert isinstance(h.group(), Group)  # nothing changed

    h = Mixed(Config(group_consumer_migration_policy="disabled"))
    h.join_all(["a"])
    refused = h.join("classic-1")
    # Thrown in Kafka's classicGroupJoinToConsumerGroup: answered with no member id.
    assert refused.error is E.INCONSISTENT_GROUP_PROTOCOL and refused.member_id == ""
    assert isinstance(h.group(), ConsumerGroup) and set(h.group().members) == {"a"}


def test_a_classic_member_with_a_stale_generation_is_refused() -> None:
    h = Mixed()
    h.join_all(["a"])
    first = h.join()
    h.rejoin_and_sync(first.member_id)
    generation, _ = h.classic[first.member_id]
    assert h.coordinator.heartbeat(h.now, GROUP, first.member_id, generation + 7) is (
        E.ILLEGAL_GENERATION
    )
    # A consumer-protocol member does not speak the classic heartbeat.
    assert h.coordinator.heartbeat(h.now, GROUP, "a", h.group().members["a"].epoch) is (
        E.UNKNOWN_MEMBER_ID
    )


def test_a_silent_classic_member_is_fenced_after_its_session_timeout() -> None:
    h = Mixed()
    state = h.join_all(["a"])
    consumers = dict(state)
    first = h.join()
    h.rejoin_and_sync(first.member_id)
    converge(h, consumers)
    # The consumer member keeps heartbeating; the classic one falls silent.
    for _ in range(SESSION // 1000 + 1):
        h.tick(1000)
        epoch, owned = consumers["a"]
        out = h.hb("a", epoch, owned=owned)
        consumers["a"] = (out.member_epoch, h.owned(out) if out.assignment else owned)
    assert first.member_id not in h.group().members
    assert consumers["a"][1]["foo"] == list(range(6))


def test_a_classic_member_replacing_the_last_static_consumer_member_turns_the_group_classic() -> (
    None
):
    # Kafka's classicGroupJoinToConsumerGroup, step 4: the static member's new incarnation
    # speaks the classic protocol and the group has no other consumer-protocol member, so the
    # group becomes classic: Stable at its epoch, the newcomer holding the old assignment.
    h = Mixed()
    old = new_member_id()
    out = h.hb(old, 0, instance="app-1")
    out = h.hb(old, out.member_epoch, owned=h.owned(out), instance="app-1")
    assert out.error is E.NONE and h.group().members[old].assigned
    epoch = h.group().epoch
    assert h.hb(old, -2, instance="app-1").error is E.NONE  # a static member's pause
    joined = h.join(instance="app-1")
    assert joined.error is E.NONE and joined.generation_id == epoch
    group = h.group()
    assert isinstance(group, Group), group
    assert group.state is GroupState.STABLE and group.generation_id == epoch
    assert list(group.members) == [joined.member_id]
    synced = h.sync(joined.member_id, epoch, {}, instance="app-1")
    assert synced.error is E.NONE and _partitions(synced.assignment) == list(range(6))
    h.tick(SESSION - 1)
    assert h.coordinator.heartbeat(h.now, GROUP, joined.member_id, epoch, "app-1") is E.NONE
    assert group.state is GroupState.STABLE  # no rebalance on the way
