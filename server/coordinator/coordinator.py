"""The coordinator's single entry point: group membership and offsets behind one facade.

Each method is given `now` (ms) and returns what to answer plus, in a `Result`, the records
to persist and the parked replies it completes. The facade also knows which offsets
partitions this coordinator can serve right now (a partition may be loading, failed, or
owned elsewhere) and answers their groups with the error Kafka would. Two mixins hold what
no request path runs: the admin APIs (admin.py) and partitions coming into service and going
out of it (partition_loading.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.admin import GroupAdmin
from minicoord.server.coordinator.classic.manager import GroupManager, Protocols, random_member_id
from minicoord.server.coordinator.group import Group, is_consumer_group
from minicoord.server.coordinator.offset_requests import OffsetRequests
from minicoord.server.coordinator.offsets import OffsetsManager
from minicoord.server.coordinator.partition_loading import PartitionLoading
from minicoord.server.coordinator.partition_status import STATUS_ERROR, PartitionStatus
from minicoord.server.coordinator.partitioning import partition_for
from minicoord.server.coordinator.results import (
    Effects,
    JoinOutcome,
    LeaveOutcome,
    Result,
    SyncOutcome,
    Ticket,
)
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.group_configs import GroupConfigs
from minicoord.server.topics import TopicRegistry

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.group import ConsumerGroup
    from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager
    from minicoord.server.coordinator.consumer.mixed import MixedGroups
    from minicoord.server.coordinator.consumer.requests import HeartbeatOutcome, HeartbeatRequest
    from minicoord.server.coordinator.consumer.targets import TopicsView
    from minicoord.server.coordinator.share.groups import ShareGroup, ShareGroups
    from minicoord.server.coordinator.txn_offsets import PendingTxnOffsets

log = logging.getLogger("minicoord.coordinator")


class GroupCoordinator(GroupAdmin, PartitionLoading):
    def __init__(
        self,
        config: Config,
        new_member_id: Callable[[str], str] = random_member_id,
        timers: TimerQueue | None = None,
        topics: TopicsView | None = None,
    ) -> None:
        self.config = config
        # offsets.topic.num.partitions until the broker finds `__consumer_offsets` made with
        # another count (use_offsets_partitions).
        self.offsets_partitions = config.offsets_topic_num_partitions
        # The broker shares one queue between the coordinator and the data path.
        self.timers = timers if timers is not None else TimerQueue()
        self.topics: TopicsView = topics if topics is not None else TopicRegistry(config)
        self.groups = GroupManager(config, self.timers, self.partition_for, new_member_id)
        self.offsets = OffsetsManager()
        # Offsets of open transactions (TxnOffsetCommit): made by the first one.
        self.txn_offsets: PendingTxnOffsets | None = None
        # Only partitions that are not ACTIVE are listed, so the common case costs one
        # empty-dict test per request.
        self.partition_status: dict[int, PartitionStatus] = {}
        self.groups.paused = self.partition_status
        self.group_configs = GroupConfigs(config)
        requests = OffsetRequests(
            config,
            self.groups,
            lambda: self.consumers,
            self.offsets,
            self.unavailable,
            self.partition_for,
            self.partition_status,
        )
        requests.is_share_group = lambda group_id: self.share_group(group_id) is not None
        # Bound once here, so a commit costs the same call as a method of this class.
        self.commit_offsets = requests.commit_offsets
        self.commit_one = requests.commit_one
        self.txn_commit_refused = requests.txn_commit_refused
        self.fetch_offsets = requests.fetch_offsets
        self.delete_offsets = requests.delete_offsets
        self.delete_topic_offsets = requests.delete_topic_offsets
        self.expire_offsets = requests.expire_offsets
        # Told of each refused ConsumerGroupHeartbeat (client id, host, version, error,
        # message): the broker's request log words the ones a client cannot get past.
        self.on_refusal: Callable[[str, str, int, ErrorCode, str | None, str], None] | None = None
        self._partitions: dict[str, int] = {}

    @cached_property
    def consumers(self) -> ConsumerGroupManager:
        """KIP-848 consumer groups, made when first needed: a server whose clients all speak
        the classic protocol never loads the consumer protocol's modules (0.4 MB of RSS)."""
        from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager

        # They live in the same dict as classic groups: one id, one group.
        consumers = ConsumerGroupManager(
            self.config, self.timers, self.groups.groups, self.partition_for, self.topics
        )
        consumers.rebalance_listeners = self.groups.rebalance_listeners
        consumers.paused = self.partition_status
        consumers.session_overrides = self.group_configs.session_ms
        consumers.interval_overrides = self.group_configs.interval_ms
        return consumers

    @cached_property
    def shares(self) -> ShareGroups:
        """KIP-932 share groups, made by the first ShareGroupHeartbeat. They are kept apart
        from the other groups (their requests are others), but one id is one group."""
        from minicoord.server.coordinator.share.groups import ShareGroups

        return ShareGroups(
            self.config,
            self.timers,
            self.topics,
            lambda group_id: group_id in self.groups.groups,
            self.group_configs.share_session_ms,
            self.group_configs.share_interval_ms,
        )

    def share_group(self, group_id: str) -> ShareGroup | None:
        """The share group of this id, if there is one; loads nothing if there is none."""
        return self.shares.groups.get(group_id) if "shares" in self.__dict__ else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group of this id, if it is one; loads nothing if it is not."""
        group = self.groups.groups.get(group_id)
        return group if is_consumer_group(group) else None

    @cached_property
    def mixed(self) -> MixedGroups:
        """Classic members in consumer groups (KIP-848's upgrade path), made on first use: a
        server whose groups keep to one protocol never loads it."""
        from minicoord.server.coordinator.consumer.mixed import MixedGroups

        return MixedGroups(self.groups, self.consumers)

    def pending_txn_offsets(self) -> PendingTxnOffsets:
        """The offsets of open transactions, made with the first TxnOffsetCommit."""
        if self.txn_offsets is None:
            from minicoord.server.coordinator.txn_offsets import PendingTxnOffsets

            self.txn_offsets = self.offsets.pending = PendingTxnOffsets()
        return self.txn_offsets

    def partition_for(self, group_id: str) -> int:
        # The Java hash walks the id in Python on every commit; remember it per group. Bounded
        # by clearing: entries outlive their groups (at most 1 MB for the dead).
        cache = self._partitions
        partition = cache.get(group_id)
        if partition is None:
            if len(cache) >= 8192:
                cache.clear()
            partition = cache[group_id] = partition_for(group_id, self.offsets_partitions)
        return partition

    def use_offsets_partitions(self, count: int) -> None:
        """Map groups onto `count` partitions: `__consumer_offsets` was made with that many.
        Before any group is served (at start)."""
        self.offsets_partitions = count
        self._partitions.clear()

    def set_partition_status(self, partition: int, status: PartitionStatus) -> None:
        if status is PartitionStatus.ACTIVE:
            self.partition_status.pop(partition, None)
        else:
            self.partition_status[partition] = status

    def unavailable(self, group_id: str) -> ErrorCode | None:
        """The error for a group whose offsets partition cannot be served now, if any."""
        if not self.partition_status:
            return None
        status = self.partition_status.get(self.partition_for(group_id))
        return STATUS_ERROR[status] if status else None

    # -- operator actions -------------------------------------------------------------------

    def force_rebalance(self, now: int, group_id: str) -> Result[bool]:
        """A classic group rebalances; a consumer group gets a new epoch and target."""
        fx = Effects()
        consumer = self.consumer_group(group_id)
        if consumer is not None:
            if not consumer.members:
                return fx.result(False)
            self.consumers.force_new_target(fx, now, consumer)
            return fx.result(True)
        return fx.result(self.groups.force_rebalance(fx, now, group_id))

    def expire_member(self, now: int, group_id: str, member_id: str) -> Result[bool]:
        """Remove (fence) a member now, as its session timing out would."""
        fx = Effects()
        consumer = self.consumer_group(group_id)
        if consumer is not None:
            if member_id not in consumer.members:
                return fx.result(False)
            log.info("group %s: member %s fenced by an operator", group_id, member_id)
            self.consumers.fence(
                fx, now, consumer, [member_id], f"member {member_id} fenced by an operator"
            )
            return fx.result(True)
        return fx.result(self.groups.expire_member(fx, now, group_id, member_id))

    # -- retention ------------------------------------------------------------------------

    def start(self, now: int) -> None:
        """Begin the periodic offset-retention check (offsets.retention.check.interval.ms)."""
        self.timers.schedule(
            ("retention",),
            now + self.config.offsets_retention_check_interval_ms,
            self._on_retention,
        )

    def _on_retention(self, now: int) -> Effects:
        fx = Effects()
        self.expire_offsets(fx, now)
        self.start(now)
        return fx

    # -- time -----------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def advance(self, now: int) -> Result[None]:
        """Fire every timer due at `now`; their effects are merged into one result."""
        fx = Effects()
        # Callbacks may schedule timers that are already due (a zero delay), so loop.
        for _ in range(10_000):
            due = self.timers.pop_due(now)
            if not due:
                break
            for callback in due:
                out = callback(now)
                fx.replies.extend(out.replies)
                fx.records.extend(out.records)
        return fx.result(None)

    # -- membership -----------------------------------------------------------------------

    def join_group(
        self,
        now: int,
        ticket: Ticket,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        require_known_member_id: bool,
        supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> Result[None]:
        fx = Effects()
        error = self.unavailable(group_id)
        if error is None and self.share_group(group_id) is not None:
            # As Kafka's classicGroupJoin for a group of another type.
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            fx.reply(ticket, JoinOutcome(error, member_id=member_id))
            return fx.result(None)
        consumer = self.consumer_group(group_id)
        if consumer is not None:
            cfg = self.config
            if not (
                cfg.group_min_session_timeout_ms
                <= session_timeout_ms
                <= cfg.group_max_session_timeout_ms
            ):
                fx.reply(
                    ticket, JoinOutcome(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
                )
                return fx.result(None)
            if consumer.members:
                self.mixed.join(
                    fx,
                    now,
                    consumer,
                    ticket=ticket,
                    member_id=member_id,
                    group_instance_id=group_instance_id,
                    client_id=client_id,
                    client_host=client_host,
                    session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms,
                    protocol_type=protocol_type,
                    protocols=protocols,
                    require_known_member_id=require_known_member_id,
                )
                return fx.result(None)
            # An empty consumer group makes way for a classic one, whatever the policy.
            self.consumers.delete(fx, consumer)
        self.groups.join(
            fx,
            now,
            ticket=ticket,
            group_id=group_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
            require_known_member_id=require_known_member_id,
            supports_skip_assignment=supports_skip_assignment,
            reason=reason,
        )
        return fx.result(None)

    def sync_group(
        self,
        now: int,
        ticket: Ticket,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> Result[None]:
        fx = Effects()
        error = self.unavailable(group_id)
        if error is not None:
            if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # As Kafka does: the rebalance state is lost while loading, so the member must
                # rejoin; older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here.
                error = ErrorCode.REBALANCE_IN_PROGRESS
            fx.reply(ticket, SyncOutcome(error))
            return fx.result(None)
        consumer = self.consumer_group(group_id)
        if consumer is not None:
            self.mixed.sync(
                fx,
                now,
                consumer,
                ticket=ticket,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
            )
            return fx.result(None)
        self.groups.sync(
            fx,
            now,
            ticket=ticket,
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
        )
        return fx.result(None)

    def heartbeat(
        self,
        now: int,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """Heartbeats change only soft state: no records, no replies, so just the error code."""
        error = self.unavailable(group_id)
        if error is not None:
            # As Kafka does: while the group is loading, heartbeats are answered blindly.
            return ErrorCode.NONE if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
        group = self.groups.groups.get(group_id)
        if group is not None and type(group) is not Group:  # is_consumer_group, inlined
            return self.mixed.heartbeat(now, group, member_id, generation_id, group_instance_id)
        return self.groups.heartbeat(now, group_id, member_id, generation_id, group_instance_id)

    def leave_group(
        self, now: int, group_id: str, members: list[tuple[str, str | None]]
    ) -> Result[LeaveOutcome]:
        fx = Effects()
        error = self.unavailable(group_id)
        if error is not None:
            return fx.result(LeaveOutcome(error))
        consumer = self.consumer_group(group_id)
        if consumer is not None:
            return fx.result(self.mixed.leave(fx, now, consumer, members))
        return fx.result(self.groups.leave(fx, now, group_id, members))

    # -- the consumer protocol (KIP-848) ----------------------------------------------------

    def consumer_group_heartbeat(
        self, now: int, req: HeartbeatRequest, version: int, client_id: str, client_host: str
    ) -> Result[HeartbeatOutcome]:
        # Here, not at the top: the consumer protocol loads with its first request.
        from minicoord.server.coordinator.consumer.group import ConsumerGroup
        from minicoord.server.coordinator.consumer.requests import HeartbeatError, HeartbeatOutcome
        from minicoord.server.coordinator.consumer.requests import validate as validate_heartbeat

        fx = Effects()
        try:
            validate_heartbeat(req, version, self.config)
            error = self.unavailable(req.group_id)
            if error is not None:
                return fx.result(HeartbeatOutcome(error))
            gid = req.group_id
            existing = self.groups.groups.get(gid)
            if req.member_epoch < 0:
                if not is_consumer_group(existing):
                    raise HeartbeatError(
                        ErrorCode.GROUP_ID_NOT_FOUND,
                        f"Group {gid} not found." if existing is None else
                        f"Group {gid} is not a consumer group.",
                    )  # fmt: skip
                return fx.result(self.consumers.leave(fx, now, req, existing))
            converted = None
            if is_consumer_group(existing):
                group, created = existing, False
            elif req.member_epoch != 0:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Consumer group {gid} not found." if existing is None else
                    f"Group {gid} is not a consumer group.",
                )  # fmt: skip
            elif existing is None:
                if self.share_group(gid) is not None:
                    raise HeartbeatError(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."
                    )
                group, created = ConsumerGroup(gid, self.partition_for(gid)), True
            else:
                group, created, converted = self.mixed.upgrade(fx, now, existing), True, existing
            outcome = self.consumers.heartbeat(fx, now, req, client_id, client_host, group, created)
            if converted is not None:
                self.mixed.finish_upgrade(fx, now, converted, group)
            return fx.result(outcome)
        except HeartbeatError as exc:
            if self.on_refusal is not None:
                self.on_refusal(
                    client_id, client_host, version, exc.error, exc.message, req.group_id
                )
            # Refused before anything changed: none of the effects gathered so far apply.
            return Effects().result(HeartbeatOutcome(exc.error, exc.message))

    def steady_consumer_heartbeat(
        self, now: int, group_id: str, member_id: str, epoch: int, instance_id: str | None,
        client_id: str, client_host: str,
    ) -> HeartbeatOutcome | None:  # fmt: skip
        """The answer to a heartbeat that says nothing but its member id, epoch and instance
        id, from a member reconciled to a settled group; None sends it the general way, which
        answers such a heartbeat the same. Kafka's static checks need not run: a member with
        this id and epoch exists only if its join passed them."""
        if epoch <= 0 or self.partition_status:
            return None
        group = self.groups.groups.get(group_id)
        if group is None or type(group) is Group:  # not is_consumer_group, inlined
            return None
        return self.consumers.steady(
            now, group, member_id, epoch, instance_id, client_id, client_host
        )

    def on_topics_changed(self, names: set[str], created: bool) -> None:
        """Topics were created, deleted or grew: consumer groups subscribed to them follow."""
        if "consumers" in self.__dict__:  # else there are none
            self.consumers.on_topics_changed(names, created)
        if "shares" in self.__dict__:
            self.shares.on_topics_changed()

    def on_acls_changed(self) -> None:
        """What a principal may describe may have changed: consumer groups resolve their
        regexes again at their next ConsumerGroupHeartbeat."""
        if "consumers" in self.__dict__:
            self.consumers.on_acls_changed()
