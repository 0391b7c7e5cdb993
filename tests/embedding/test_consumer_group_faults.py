"""The operator's faults on a KIP-848 consumer group, with confluent-kafka members speaking
`group.protocol=consumer`: fencing a member (it rejoins under a new epoch and the group
settles again) and forcing a new target assignment (a new group epoch the members follow
without losing the partitions they keep). Every wait is bounded."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from minicoord.testing import EmbeddedServer, running

TOPIC = "faults848"
PARTITIONS = 4


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    with running(
        configs={"group.consumer.heartbeat.interval.ms": 100},
        topics=[(TOPIC, PARTITIONS)],
        control_port=0,
    ) as s:
        yield s


def consumers(server: EmbeddedServer, group_id: str, n: int) -> list[Consumer]:
    out = []
    for i in range(n):
        c = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": group_id,
                "group.protocol": "consumer",
                "client.id": f"member-{i}",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        c.subscribe([TOPIC])
        out.append(c)
    return out


def poll_until(check: Callable[[], bool], members: list[Consumer], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.05)):
        if check() or time.monotonic() > deadline:
            break
        for c in members:
            c.poll(0.01)
    assert check(), "condition not reached in time"


def group_view(server: EmbeddedServer, group_id: str) -> tuple[str, int, dict[str, int]]:
    def view() -> tuple[str, int, dict[str, int]]:
        g = server.server.broker.coordinator.groups.groups[group_id]
        return g.state.value, g.epoch, {m.member_id: m.epoch for m in g.members.values()}

    return server.call(view)


def assignments(members: list[Consumer]) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in members]


def settled(members: list[Consumer]) -> Callable[[], bool]:
    def check() -> bool:
        current = assignments(members)
        owned = [p for a in current for p in a]
        return all(current) and sorted(owned) == list(range(PARTITIONS))

    return check


def close_all(members: list[Consumer]) -> None:
    for c in members:
        c.close()


def test_a_fenced_member_rejoins_and_the_group_settles_again(
    server: EmbeddedServer, group_id: str
) -> None:
    members = consumers(server, group_id, 2)
    try:
        poll_until(settled(members), members)
        state, epoch, before = group_view(server, group_id)
        assert state == "Stable" and len(before) == 2
        victim = sorted(before)[0]
        assert server.control.expire_member(group_id, victim) is True
        # Fencing bumps the epoch; the fenced client learns it on its next heartbeat
        # (FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID), rejoins at epoch 0 and is let back in.

        def back() -> bool:
            st, ep, now_members = group_view(server, group_id)
            return (
                st == "Stable"
                and ep > epoch
                and len(now_members) == 2
                and all(e == ep for e in now_members.values())
                and settled(members)()
            )

        poll_until(back, members)
        assert server.control.expire_member(group_id, "no-such-member") is False
    finally:
        close_all(members)


def test_a_forced_new_target_bumps_the_epoch_and_members_follow(
    server: EmbeddedServer, group_id: str
) -> None:
    members = consumers(server, group_id, 2)
    try:
        poll_until(settled(members), members)
        _, epoch, ids = group_view(server, group_id)
        owned = assignments(members)
        assert server.control.force_rebalance(group_id) is True

        def followed() -> bool:
            st, ep, now_members = group_view(server, group_id)
            return st == "Stable" and ep == epoch + 1 and set(now_members.values()) == {ep}

        poll_until(followed, members)
        # Same members, and with the sticky assignor nobody gave anything up.
        assert set(group_view(server, group_id)[2]) == set(ids)
        assert assignments(members) == owned
    finally:
        close_all(members)


def test_the_rebalance_line_reports_consumer_groups(
    server: EmbeddedServer, group_id: str, caplog: Any
) -> None:
    caplog.set_level("INFO", logger="minicoord.rebalance")
    members = consumers(server, group_id, 1)
    try:
        poll_until(settled(members), members)
        poll_until(
            lambda: any(
                f"group={group_id}" in r.getMessage() and "protocol=consumer" in r.getMessage()
                for r in caplog.records
            ),
            members,
        )
    finally:
        close_all(members)


def test_metrics_count_consumer_groups_and_their_reconciliations(group_id: str) -> None:
    with running(
        configs={"group.consumer.heartbeat.interval.ms": 100},
        topics=[(TOPIC, PARTITIONS)],
        metrics_port=0,
    ) as server:
        members = consumers(server, group_id, 2)
        try:
            poll_until(settled(members), members)
            poll_until(lambda: group_view(server, group_id)[0] == "Stable", members)
            port = server.server.metrics_port
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                body = r.read().decode()
        finally:
            close_all(members)
    assert re.search(r'minicoord_groups\{protocol="consumer",state="Stable"\} 1\.0', body), body
    assert re.search(r"minicoord_members 2\.0", body)
    assert re.search(
        r'minicoord_rebalances_total\{protocol="consumer",state="Stable"\} [1-9]', body
    )
    assert re.search(
        r'minicoord_rebalance_duration_seconds_count\{protocol="consumer"\} [1-9]', body
    )
    assert re.search(
        r'minicoord_requests_total\{api="ConsumerGroupHeartbeat",version="\d"\} [1-9]', body
    )
