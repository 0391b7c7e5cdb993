"""Each finished rebalance yields one event and one greppable log line."""

from __future__ import annotations

import logging

import pytest
from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.results import RebalanceEvent

PROTOCOLS = [("range", b"")]


def join(c: GroupCoordinator, now: int, ticket: str, member_id: str = "") -> None:
    c.join_group(
        now,
        ticket,
        group_id="g",
        member_id=member_id,
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=5_000,
        protocol_type="consumer",
        protocols=PROTOCOLS,
        require_known_member_id=False,
    )


def test_rebalance_event_and_log_line(caplog: pytest.LogCaptureFixture) -> None:
    ids = iter(["m1", "m2"])
    c = GroupCoordinator(Config(), new_member_id=lambda _: next(ids))
    events: list[RebalanceEvent] = []
    c.groups.rebalance_listeners.append(events.append)
    with caplog.at_level(logging.INFO, "minicoord.rebalance"):
        join(c, 1_000, "j1")
        result = c.sync_group(
            1_040,
            "s1",
            group_id="g",
            generation_id=1,
            member_id="m1",
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments={"m1": b"a"},
        )
        assert result.reply_for("s1").error is ErrorCode.NONE
        # A second member: the first must rejoin; the event carries the first cause.
        join(c, 2_000, "j2")
        join(c, 2_300, "j3", "m1")
        c.sync_group(
            2_350,
            "s2",
            group_id="g",
            generation_id=2,
            member_id="m1",
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments={},
        )
    assert events == [
        RebalanceEvent("g", 1, "Stable", "new member m1 joined", 1, 40),
        RebalanceEvent("g", 2, "Stable", "new member m2 joined", 2, 350),
    ]
    lines = [r.getMessage() for r in caplog.records if r.name == "minicoord.rebalance"]
    assert lines == [
        "rebalance group=g generation=1 state=Stable members=1 duration_ms=40 "
        'reason="new member m1 joined" protocol=classic',
        "rebalance group=g generation=2 state=Stable members=2 duration_ms=350 "
        'reason="new member m2 joined" protocol=classic',
    ]
