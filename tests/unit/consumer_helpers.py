"""Driving a coordinator's KIP-848 consumer groups on a manual clock, as members would."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer.requests import HeartbeatOutcome, HeartbeatRequest
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.topics import Topic, TopicRegistry

GROUP = "cg"
START = 1_000_000
# Targets computed in the heartbeat that bumps the epoch (Kafka 4.0-4.2), so each rule shows
# in one step; test_assignment_batching covers the interval.
CONFIG = Config(
    group_consumer_heartbeat_interval_ms=500,
    group_consumer_session_timeout_ms=10_000,
    group_min_session_timeout_ms=1000,
    group_consumer_assignment_interval_ms=0,
)


class Harness:
    """A coordinator with its own topics, clock and the records it wrote."""

    def __init__(self, config: Config = CONFIG, **topics: int) -> None:
        self.config = config
        self.registry = TopicRegistry(config)
        self.coordinator = GroupCoordinator(config, topics=self.registry)
        self.now = START
        self.records: list[Any] = []
        self.replies: dict[int, Any] = {}
        for name, partitions in (topics or {"foo": 6}).items():
            self.topic(name, partitions)

    def topic(self, name: str, partitions: int) -> Topic:
        topic, _ = self.registry.create(name, partitions)
        self.coordinator.on_topics_changed({name}, created=True)
        return topic

    def tid(self, name: str) -> uuid.UUID:
        topic = self.registry.get(name)
        assert topic is not None
        return topic.topic_id

    def absorb(self, result: Any) -> Any:
        self.records.extend(result.records)
        for ticket, outcome in result.replies:
            self.replies[ticket] = outcome
        return result.value

    def tick(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.coordinator.advance(self.now))

    def hb(
        self,
        member: str,
        epoch: int,
        *,
        topics: list[str] | None = None,
        owned: dict[str, list[int]] | None = None,
        instance: str | None = None,
        regex: str | None = None,
        assignor: str | None = None,
        rebalance_timeout_ms: int = -1,
        version: int = 1,
        group: str = GROUP,
        describable: Callable[[str], bool] | None = None,
    ) -> HeartbeatOutcome:
        if epoch == 0:
            rebalance_timeout_ms = 30_000 if rebalance_timeout_ms == -1 else rebalance_timeout_ms
            owned = owned if owned is not None else {}
            topics = topics if topics is not None or regex is not None else ["foo"]
        request = HeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=rebalance_timeout_ms,
            topics=None if topics is None else tuple(topics),
            regex=regex,
            server_assignor=assignor,
            owned=None
            if owned is None
            else {self.tid(t): frozenset(ps) for t, ps in owned.items()},
            describable=describable,
        )
        return self.absorb(
            self.coordinator.consumer_group_heartbeat(
                self.now, request, version, f"client-{member}", "/127.0.0.1"
            )
        )

    def owned(self, outcome: HeartbeatOutcome) -> dict[str, list[int]]:
        assert outcome.assignment is not None, outcome
        names = {self.tid(n): n for n in (t.name for t in self.registry.user_topics())}
        return {names[t]: sorted(ps) for t, ps in outcome.assignment.items() if ps}

    def group(self, group_id: str = GROUP) -> Any:
        return self.coordinator.groups.groups[group_id]

    def join_all(self, members: list[str], topics: list[str] | None = None) -> dict[str, Any]:
        """Members join, then heartbeat (reporting what they own) until all are stable."""
        state: dict[str, Any] = {}
        for m in members:
            out = self.hb(m, 0, topics=topics)
            assert out.error is ErrorCode.NONE, out
            state[m] = (out.member_epoch, self.owned(out))
        for _ in range(10):
            for m in members:
                epoch, owned = state[m]
                out = self.hb(m, epoch, owned=owned)
                assert out.error is ErrorCode.NONE, out
                state[m] = (out.member_epoch, self.owned(out) if out.assignment else owned)
            if self.group().state.value == "Stable":
                return state
        raise AssertionError(f"not stable: {self.group()}")
