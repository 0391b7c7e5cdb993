"""One group id shared by members of both protocols: confluent-kafka with
`group.protocol=consumer` (KIP-848) and classic members (confluent-kafka with its "range"
assignor, kafka-python), as Kafka 4.x allows under `group.consumer.migration.policy`
(minicoord's default: bidirectional).

The group is created by a consumer-protocol member, so it is a consumer group; the classic
members join it through JoinGroup/SyncGroup/Heartbeat, with protocol type "consumer" as stock
clients send, and the coordinator computes their assignments too (every classic member is a
follower). Who owns what is checked at every moment it changes: an OwnershipLedger records
every member's rebalance callbacks in the order they run, and a partition handed to a member
while another still holds it fails the test (clientkit.OwnershipLedger says why that is a
real double ownership, not an artefact of threads). The confluent members are polled by this
thread, whose consistent snapshot of them is checked for overlap after every round of polls;
kafka-python polls on a thread of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clientkit import (
    ALL,
    RDKAFKA_LOG,
    TOPIC,
    ConfluentMember,
    ConfluentMembers,
    KafkaPythonMember,
    OwnershipLedger,
    group_lines,
    stable_with,
    wait_log,
)
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient
from groupkit import describe_consumer_group, epoch_bumps, rebalances, settled_with
from minicoord.server.process import ServerProcess

pytestmark = pytest.mark.clients


@pytest.fixture
def ledger() -> OwnershipLedger:
    return OwnershipLedger()


@pytest.fixture
def members(
    server: ServerProcess, group_id: str, ledger: OwnershipLedger
) -> Iterator[ConfluentMembers]:
    group = ConfluentMembers(server.bootstrap, group_id, prefix="mixed")

    def no_double_ownership() -> None:
        assert not ledger.violations, ledger.describe()
        # The confluent members' own views, all read by this thread between polls.
        seen: dict[int, str] = {}
        for m in group.all:
            for p in m.assignment:
                assert p not in seen, f"partition {p} owned by {seen[p]} and {m.name}"
                seen[p] = m.name

    group.checks.append(no_double_ownership)
    yield group
    group.close_all()
    for other in group.others:
        other.close()


def described(server: ServerProcess, group: str) -> Any:
    admin = AdminClient(
        {"bootstrap.servers": server.bootstrap, "client.id": "mixed-admin", "logger": RDKAFKA_LOG}
    )
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)


def check_cover(
    members: ConfluentMembers, ledger: OwnershipLedger, group: list[Any], timeout: float = 30
) -> None:
    """`group` covers the topic, as evenly as it splits, and the ledger agrees with what each
    member says it owns."""
    members.wait_cover(
        group,
        timeout,
        extra=lambda: ledger.owners() == {m.name: m.assignment for m in group if m.assignment},
    )
    assert not ledger.violations, ledger.describe()


def test_classic_and_consumer_members_share_a_consumer_group(
    server: ServerProcess, members: ConfluentMembers, group_id: str, ledger: OwnershipLedger
) -> None:
    first = members.add(protocol="consumer", ledger=ledger)
    check_cover(members, ledger, [first])
    log = wait_log(server, settled_with(group_id, 1), what="the consumer group with 1 member")
    assert group_lines(log, group_id, "created (consumer protocol)")

    second: ConfluentMember = members.add(protocol="consumer", ledger=ledger)
    classic: ConfluentMember = members.add(protocol="classic", strategy="range", ledger=ledger)
    kp = KafkaPythonMember("mixed-kp", server.bootstrap, group_id, ledger=ledger)
    members.others.append(kp)
    everyone = [first, second, classic, kp]
    check_cover(members, ledger, everyone)
    assert sorted(len(m.assignment) for m in everyone) == [1, 1, 2, 2]
    log = wait_log(server, settled_with(group_id, 4), what="a Stable rebalance with 4 members")
    # The coordinator ran it as a consumer group throughout: never a classic generation.
    assert {r.protocol for r in rebalances(log, group_id)} == {"consumer"}
    assert not group_lines(log, group_id, "generation")
    desc = described(server, group_id)
    assert desc.type == ConsumerGroupType.CONSUMER
    assert desc.state == ConsumerGroupState.STABLE
    members.tick()
    assert {m.member_id for m in desc.members} == {m.member_id for m in everyone}
    by_id = {m.member_id: m for m in desc.members}
    for m in everyone:
        parts = by_id[m.member_id].assignment.topic_partitions
        assert frozenset(tp.partition for tp in parts if tp.topic == TOPIC) == m.assignment
    # ConsumerGroupDescribe v1 tells the protocols apart (KIP-1099): 0 classic, 1 consumer.
    types = {
        m.member_id: m.member_type
        for m in describe_consumer_group(server.bootstrap, group_id).members
    }
    assert types == {first.member_id: 1, second.member_id: 1, classic.member_id: 0, kp.member_id: 0}

    # A classic member leaves (LeaveGroup): the other three take its partitions.
    classic_id = classic.member_id
    classic.close()
    trio = [first, second, kp]
    check_cover(members, ledger, trio)
    log = wait_log(server, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
    assert group_lines(log, group_id, f"members {classic_id} left")

    # A consumer-protocol member leaves (heartbeat at epoch -1).
    second_id = second.member_id
    second.close()
    pair = [first, kp]
    check_cover(members, ledger, pair)
    log = wait_log(server, settled_with(group_id, 2), what="a Stable rebalance with 2 members")
    assert group_lines(log, group_id, f"member {second_id} left")
    assert {r.protocol for r in rebalances(log, group_id)} == {"consumer"}

    # The last consumer-protocol member leaves: only a classic member remains, so the group
    # turns back into a classic group (bidirectional migration) and kafka-python, now its
    # leader, assigns itself everything with its own range assignor.
    first.close()
    check_cover(members, ledger, [kp])
    assert kp.assignment == ALL
    log = wait_log(server, stable_with(group_id, 1), what="a classic Stable generation")
    assert group_lines(log, group_id, "converted from consumer back to classic")
    assert rebalances(log, group_id)[-1].protocol == "classic"
    assert described(server, group_id).type == ConsumerGroupType.CLASSIC
    assert kp.error is None, kp.error
    assert not ledger.violations, ledger.describe()


def test_a_consumer_member_joining_upgrades_a_classic_group_online(
    server: ServerProcess, members: ConfluentMembers, group_id: str, ledger: OwnershipLedger
) -> None:
    classic = members.add(protocol="classic", strategy="range", ledger=ledger)
    kp = KafkaPythonMember("mixed-kp", server.bootstrap, group_id, ledger=ledger)
    members.others.append(kp)
    check_cover(members, ledger, [classic, kp])
    log = wait_log(server, stable_with(group_id, 2), what="a classic Stable generation of 2")
    generation = rebalances(log, group_id)[-1].epoch
    assert rebalances(log, group_id)[-1].protocol == "classic"
    assert described(server, group_id).type == ConsumerGroupType.CLASSIC

    # The first consumer-protocol member converts the group (policy bidirectional): the
    # classic members keep their partitions at the classic generation, and the newcomer
    # gets its share only as they give partitions up on rejoining.
    joiner = members.add(protocol="consumer", ledger=ledger)
    trio = [classic, kp, joiner]
    check_cover(members, ledger, trio)
    assert all(len(m.assignment) == 2 for m in trio)
    log = wait_log(server, settled_with(group_id, 3), what="a Stable rebalance with 3 members")
    # The line names the classic group as it was converted, before the joiner came in.
    assert group_lines(
        log, group_id, f"converted from classic (generation {generation}, 2 members) to consumer"
    ), log
    # The group epoch went on from the classic generation: one bump, for the joiner.
    assert epoch_bumps(log, group_id) == [(generation + 1, f"member {joiner.member_id} joined")]
    assert described(server, group_id).type == ConsumerGroupType.CONSUMER
    epochs = {
        m.member_id: m.member_epoch
        for m in describe_consumer_group(server.bootstrap, group_id).members
    }
    assert epochs == dict.fromkeys((m.member_id for m in trio), generation + 1)
    assert kp.error is None, kp.error


@pytest.fixture
def upgrade_only(server_factory: Any) -> ServerProcess:
    return server_factory(
        configs={"group.consumer.migration.policy": "upgrade"}, topics=[(TOPIC, 6)]
    )


def test_classic_members_left_in_a_consumer_group_take_over_a_leavers_partitions(
    upgrade_only: ServerProcess, group_id: str, ledger: OwnershipLedger
) -> None:
    # Under policy `upgrade` the group stays a consumer group when its last consumer-protocol
    # member leaves, and no consumer-protocol heartbeat is left to compute the new target:
    # the classic members must still be told to rejoin and get the leaver's partitions, as
    # Kafka's classic heartbeat tells them (sweep23: they kept theirs; the rest went unread).
    members = ConfluentMembers(upgrade_only.bootstrap, group_id, prefix="upgrade")
    try:
        first = members.add(protocol="consumer", ledger=ledger)
        check_cover(members, ledger, [first])
        classic_a = members.add(protocol="classic", strategy="range", ledger=ledger)
        classic_b = members.add(protocol="classic", strategy="range", ledger=ledger)
        check_cover(members, ledger, [first, classic_a, classic_b])
        first_id = first.member_id
        first.close()
        check_cover(members, ledger, [classic_a, classic_b])
        assert sorted(len(m.assignment) for m in (classic_a, classic_b)) == [3, 3]
        log = wait_log(upgrade_only, settled_with(group_id, 2), what="a Stable epoch of 2")
        assert group_lines(log, group_id, f"member {first_id} left")
        assert described(upgrade_only, group_id).type == ConsumerGroupType.CONSUMER
    finally:
        members.close_all()
