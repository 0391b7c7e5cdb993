"""Consumer-group epochs, target assignments and each member's reconciliation toward its
target. A mixin of ConsumerGroupManager (manager.py), whose heartbeat path calls these after
its checks; the rules are Kafka's GroupMetadataManager's, as there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from minicoord.protocol import consumer_records as cr
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer import targets
from minicoord.server.coordinator.consumer.group import (
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
)
from minicoord.server.coordinator.consumer.reconcile import (
    Reconciled,
    UnknownMemberState,
    reconcile,
)
from minicoord.server.coordinator.consumer.requests import HeartbeatError
from minicoord.server.coordinator.consumer.targets import TopicsView
from minicoord.server.coordinator.results import (
    Effects,
    RebalanceEvent,
    announce_rebalance,
)
from minicoord.server.coordinator.timers import TimerQueue

log = logging.getLogger("minicoord.coordinator")


class EpochsAndTargets:
    config: Config
    timers: TimerQueue
    topics: TopicsView
    rebalance_listeners: list[Callable[[RebalanceEvent], None]]

    if TYPE_CHECKING:
        # Provided by ConsumerGroupManager and its lifecycle mixin.
        @property
        def default_assignor(self) -> str: ...

        def _on_assignment_due(self, now: int, group: ConsumerGroup) -> Effects: ...

        def _on_rebalance_timeout(
            self, now: int, group: ConsumerGroup, member_id: str, epoch: int
        ) -> Effects: ...

    def _maybe_bump(
        self, fx: Effects, now: int, group: ConsumerGroup, bump: bool, reason: str
    ) -> bool:
        if bump or group.refresh:
            group.refresh = False
            new_hash = targets.metadata_hash(group.subscribed_topics(), self.topics)
            if new_hash != group.metadata_hash:
                bump = True
                reason = reason or "the subscribed topics' metadata changed"
            group.metadata_hash = new_hash
            if group.legacy_partition_metadata:
                # Kafka 4.0's subscription metadata record: replaced by the hash, so it goes.
                fx.persist(group.partition, Record(cr.partition_metadata_key(group.group_id), None))
                group.legacy_partition_metadata = False
        if not bump:
            return False
        self.bump(fx, now, group, reason)
        return True

    def bump(self, fx: Effects, now: int, group: ConsumerGroup, reason: str) -> None:
        group.epoch += 1
        targets.write_epoch(fx, group)
        if group.rebalance_started_at is None:
            group.rebalance_started_at = now
            group.rebalance_reason = reason
        log.info("group %s: epoch %d: %s", group.group_id, group.epoch, reason)

    def _maybe_assign(self, fx: Effects, now: int, group: ConsumerGroup) -> None:
        if group.assignment_epoch >= group.epoch:
            return
        interval = self.config.group_consumer_assignment_interval_ms
        due = group.assignment_timestamp + interval
        if interval and group.assignment_timestamp and now < due:
            # Batched (KIP-1263): members reconcile toward the current target meanwhile. Kafka
            # waits for the next heartbeat after the interval; a timer computes it on time.
            key = ("cg-assign", group.group_id)
            if key not in self.timers:
                self.timers.schedule(key, due, self._on_assignment_due, (group,))
            return
        assignor = targets.preferred_assignor(group, self.default_assignor)
        new = targets.compute_targets(group, self.topics, assignor)
        for member_id, assignment in new.items():
            if group.target.get(member_id, {}) != assignment:
                group.target[member_id] = assignment
                targets.write_target(fx, group, member_id)
        group.assignment_epoch = group.epoch
        group.assignment_timestamp = now
        self.timers.cancel(("cg-assign", group.group_id))
        targets.write_target_epoch(fx, group, now)

    def _reconcile(
        self,
        fx: Effects,
        now: int,
        group: ConsumerGroup,
        member: ConsumerMember,
        owned: Assignment | None,
        subscription_changed: bool,
    ) -> None:
        if member.epoch == STATIC_LEAVE_EPOCH:
            return
        if not subscription_changed and member.reconciled_to(group.assignment_epoch):
            return
        current = Reconciled(
            member.epoch, member.previous_epoch, member.state, member.assigned, member.pending
        )
        subscribed = targets.topic_ids(group.member_topics(member), self.topics)
        try:
            new = reconcile(
                current,
                group.assignment_epoch,
                group.target.get(member.member_id, {}),
                subscribed,
                owned,
                lambda t, p: group.taken_by_other(member.member_id, t, p),
                subscription_changed,
            )
        except UnknownMemberState:
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH, "The member is in an unknown state."
            ) from None
        if new == current:
            return
        updated = member.copy()
        updated.epoch, updated.previous_epoch, updated.state = (
            new.epoch,
            new.previous_epoch,
            new.state,
        )
        updated.assigned, updated.pending = dict(new.assigned), dict(new.pending)
        group.put(updated)
        targets.write_current(fx, group, updated)
        if updated.uses_classic:
            return
        key = ("cg-rebalance", group.group_id, updated.member_id)
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            self.timers.schedule(
                key,
                now + max(updated.rebalance_timeout_ms, 0),
                self._on_rebalance_timeout,
                (group, updated.member_id, updated.epoch),
            )
        else:
            self.timers.cancel(key)

    def _maybe_stable(self, group: ConsumerGroup, now: int) -> None:
        """One log line and event when every member has reconciled to a new epoch."""
        if group.rebalance_started_at is None:
            return
        state = group.state
        if state not in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY):
            return
        event = RebalanceEvent(
            group.group_id,
            group.epoch,
            state.value,
            group.rebalance_reason,
            len(group.members),
            now - group.rebalance_started_at,
            "consumer",
        )
        group.rebalance_started_at = None
        group.rebalance_reason = ""
        announce_rebalance(event, self.rebalance_listeners)
