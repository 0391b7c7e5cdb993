"""Offset requests of the coordinator: commit, fetch, delete, and retention.

Kept apart from membership: these rules look at a group only to decide whether a commit or a
deletion is allowed, then read or write `OffsetsManager`. The coordinator facade binds these
methods as its own, so callers see one entry point.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.protocol.records import Record
from minicoord.server.config import Config
from minicoord.server.coordinator.classic.manager import GroupManager
from minicoord.server.coordinator.group import Group, is_consumer_group
from minicoord.server.coordinator.offsets import CommittedOffset, OffsetsManager, TopicPartition
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.server.coordinator.results import Effects, Result
from minicoord.server.coordinator.state import STABLE, GroupState

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.group import ConsumerGroup
    from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager

# Read on every commit (see state.py on Python 3.11's slow `Enum.X` reads).
_NONE = ErrorCode.NONE

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class OffsetRequests:
    def __init__(
        self,
        config: Config,
        groups: GroupManager,
        consumers: Callable[[], ConsumerGroupManager],
        offsets: OffsetsManager,
        unavailable: Callable[[str], ErrorCode | None],
        partition_for: Callable[[str], int],
        partition_status: dict[int, PartitionStatus],
    ) -> None:
        self.config = config
        self.groups = groups
        # Called only once a consumer group exists: the manager is made with the first.
        self.consumers = consumers
        self.offsets = offsets
        self.unavailable = unavailable
        self.partition_for = partition_for
        # Read directly by commit_one, which asks for every commit: the shared dict of
        # groups, and the coordinator's partitions that are not ACTIVE (nearly always none).
        self._groups = groups.groups
        self._partition_status = partition_status
        # Whether a share group holds the id (set by the coordinator): offsets of share
        # groups are not committed, as Kafka's ShareGroup.validateOffsetCommit refuses them.
        self.is_share_group: Callable[[str], bool] = lambda group_id: False

    def expire_offsets(self, fx: Effects, now: int) -> int:
        """Kafka's offset retention; returns how many offsets expired.

        An Empty group's offsets expire once it has been empty for the retention period; a
        Stable consumer group's only for topics it no longer subscribes to, counted from their
        commit; a group that only stores offsets, counted from each commit. An Empty group left
        with no offsets is deleted.
        """
        retention = self.config.offsets_retention_minutes * 60_000
        expired = 0
        for gid, group in list(self.groups.groups.items()):
            if self.unavailable(gid) is not None:
                continue
            committed = self.offsets.all_for(gid)
            subscribed: set[str] = set()
            if is_consumer_group(group):
                # Offsets of topics no member subscribes to expire from their commit.
                subscribed = group.subscribed_topics()
                for tp, offset in list(committed.items()):
                    if (
                        tp[0] not in subscribed
                        and offset.expired(offset.commit_timestamp, retention, now)
                        and not self.offsets.in_transaction(gid, tp)
                    ):
                        self.offsets.delete(fx, group.partition, gid, tp)
                        expired += 1
                if not group.members and not self._holds_offsets(gid):
                    self.consumers().delete(fx, group)
                continue
            if group.state is GroupState.EMPTY:
                from_state = group.protocol_type is not None and group.generation_id > 0
            elif group.state is GroupState.STABLE and group.protocol_type == "consumer":
                from_state = False
                known = _subscribed_topics(self.groups.subscribed_protocol_metadata(group))
                if known is None:
                    continue  # topics unknown: nothing expires (Kafka's offsetExpirationCondition)
                subscribed = known
            else:
                continue
            partition = group.partition
            for tp, offset in list(committed.items()):
                base = group.state_timestamp if from_state else offset.commit_timestamp
                if (
                    tp[0] not in subscribed
                    and offset.expired(base, retention, now)
                    and not self.offsets.in_transaction(gid, tp)
                ):
                    self.offsets.delete(fx, partition, gid, tp)
                    expired += 1
            if group.state is GroupState.EMPTY and not self._holds_offsets(gid):
                self.groups.expire(fx, now, group)
        return expired

    def _holds_offsets(self, group_id: str) -> bool:
        """Committed offsets, or offsets an open transaction holds: as Kafka's retention,
        neither those nor their group expire while a transaction may still commit them."""
        pending = self.offsets.pending
        return self.offsets.has_offsets(group_id) or (
            pending is not None and pending.holds_group(group_id)
        )

    def commit_offsets(
        self,
        now: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: list[OffsetCommitEntry],
        version: int = 8,
        retention_time_ms: int = -1,
    ) -> Result[list[ErrorCode]]:
        """`retention_time_ms` (OffsetCommit v2-4; -1 for the default): each offset's own
        expiry that long after the commit, as Kafka's OffsetMetadataManager keeps it."""
        fx = Effects()
        error = self._commit_refused(
            now, group_id, generation_id, member_id, group_instance_id, version
        )
        if error is not None:
            return fx.result([error] * len(entries))
        partition = self.partition_for(group_id)
        limit = self.config.offset_metadata_max_bytes
        commit = self.offsets.commit
        expire_timestamp = None
        if retention_time_ms != -1:
            # A Java long's sum: past Long.MAX_VALUE it wraps (and the offset expires at the
            # next check, as in Kafka); unwrapped it would not fit the record's int64.
            expire_timestamp = (now + retention_time_ms + (1 << 63)) % (1 << 64) - (1 << 63)
        errors = []
        for e in entries:
            metadata = e.metadata or ""
            if metadata_too_long(metadata, limit):
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            commit(
                fx.records,
                partition,
                group_id,
                e.topic,
                e.partition,
                e.offset,
                e.leader_epoch,
                metadata,
                now,
                expire_timestamp,
            )
            errors.append(ErrorCode.NONE)
        return fx.result(errors)

    def commit_one(
        self,
        records: list[tuple[int, Record]],
        now: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        topic: str,
        index: int,
        offset: int,
        leader_epoch: int,
        version: int,
    ) -> ErrorCode:
        """`commit_offsets` of one partition with no metadata and no group.instance.id, the
        shape of nearly every commit, without its entry objects, lists and result: the
        record to persist is appended to `records`, exactly one when the answer is NONE and
        none otherwise."""
        group = self._groups.get(group_id)
        # A member of a Stable classic group committing in its generation (nearly every
        # commit): _validate_commit's checks that can pass, in the order they would fail.
        if (
            type(group) is Group
            and not self._partition_status
            and group.state is STABLE
            and generation_id == group.generation_id
        ):
            member = group.members.get(member_id)
            if member is not None:
                member.last_heartbeat = now
                self.offsets.commit(
                    records, group.partition, group_id, topic, index, offset, leader_epoch, "", now
                )
                return _NONE
        error = self._commit_refused(now, group_id, generation_id, member_id, None, version)
        if error is not None:
            return error
        self.offsets.commit(
            records,
            self.partition_for(group_id),
            group_id,
            topic,
            index,
            offset,
            leader_epoch,
            "",
            now,
        )
        return _NONE

    def txn_commit_refused(
        self,
        now: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        """TxnOffsetCommit's checks of the group (Kafka's validateTransactionalOffsetCommit):
        OffsetCommit's, but for what versions without a member (0-2) may commit to a group
        with members, at any state, and a generation or member epoch the group does not
        have being ILLEGAL_GENERATION."""
        error = self._commit_refused(
            now, group_id, generation_id, member_id, group_instance_id, 9, transactional=True
        )
        if error in (ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.GROUP_ID_NOT_FOUND):
            return ErrorCode.ILLEGAL_GENERATION
        return error

    def _commit_refused(
        self,
        now: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        version: int,
        transactional: bool = False,
    ) -> ErrorCode | None:
        """Why this member may not commit the group's offsets now, or None."""
        # One lookup for both kinds: classic and consumer groups share the one dict.
        group = self.groups.groups.get(group_id)
        error = self.unavailable(group_id)
        if error is not None:
            return error
        if group is not None and type(group) is not Group:  # is_consumer_group, inlined
            return _validate_consumer_commit(group, generation_id, member_id, version)
        return self._validate_commit(
            now, group, group_id, generation_id, member_id, group_instance_id, version,
            transactional,
        )  # fmt: skip

    def _validate_commit(
        self,
        now: int,
        group: Group | None,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        version: int,
        transactional: bool = False,
    ) -> ErrorCode | None:
        groups = self.groups
        if group is None:
            if self.is_share_group(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND
            if generation_id >= 0:
                # A generation (v9+: member epoch) of a group this coordinator does not know.
                return (
                    ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
                )
            # A consumer that assigns itself partitions and only stores offsets here.
            groups.get_or_create(group_id, now)
            return None
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is GroupState.EMPTY:
            # As in Kafka's validateOffsetCommit: without a generation (the admin client, a
            # consumer assigning itself partitions) an Empty group's offsets may be committed
            # whatever member id the request names.
            return None
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = groups.validate_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY and not transactional:
            # Group-managed offsets may only be committed by the group's own members (but
            # TxnOffsetCommit v0-2 names no member, and Kafka takes it from anyone).
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE and not transactional:
            # Partitions are about to be reassigned; the member must rejoin first.
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:
            member.last_heartbeat = now
        return None

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[tuple[TopicPartition, CommittedOffset | None]]]:
        """Committed offsets of a group: the partitions asked for, or all (None).

        A member of a consumer group (OffsetFetch v9+) must name its current epoch.
        """
        error = self.unavailable(group_id)
        if error is not None:
            return error, []
        consumer = self._groups.get(group_id)
        if is_consumer_group(consumer) and (member_id is not None or member_epoch >= 0):
            member = consumer.members.get(member_id or "")
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, []
            if member_epoch != member.epoch:
                stale = (
                    ErrorCode.ILLEGAL_GENERATION
                    if member.uses_classic
                    else ErrorCode.STALE_MEMBER_EPOCH
                )
                return stale, []
        if partitions is None:
            return ErrorCode.NONE, list(self.offsets.all_for(group_id).items())
        return ErrorCode.NONE, [(tp, self.offsets.get(group_id, tp)) for tp in partitions]

    def delete_offsets(
        self, now: int, group_id: str, partitions: list[TopicPartition]
    ) -> Result[tuple[ErrorCode, list[ErrorCode]]]:
        fx = Effects()
        if not group_id:  # Kafka's GroupCoordinatorService, before any partition is asked
            return fx.result((ErrorCode.INVALID_GROUP_ID, []))
        error = self.unavailable(group_id)
        if error is not None:
            return fx.result((error, []))
        group = self.groups.groups.get(group_id)
        if is_consumer_group(group):
            # No state restriction for a consumer group, only its subscriptions.
            subscribed = group.subscribed_topics()
            errors = []
            for tp in partitions:
                if tp[0] in subscribed:
                    errors.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                else:
                    self.offsets.delete(fx, group.partition, group_id, tp)
                    errors.append(ErrorCode.NONE)
            return fx.result((ErrorCode.NONE, errors))
        if group is None or group.state is GroupState.DEAD:
            return fx.result((ErrorCode.GROUP_ID_NOT_FOUND, []))
        subscribed: set[str] | None = set()
        if group.state is not GroupState.EMPTY:
            if group.protocol_type != "consumer":
                return fx.result((ErrorCode.NON_EMPTY_GROUP, []))
            subscribed = _subscribed_topics(self.groups.subscribed_protocol_metadata(group))
        partition = self.partition_for(group_id)
        errors = []
        for tp in partitions:
            # Unknown topics (None): subscribed to all, as Kafka's isSubscribedToTopic.
            if subscribed is None or tp[0] in subscribed:
                errors.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                self.offsets.delete(fx, partition, group_id, tp)
                errors.append(ErrorCode.NONE)
        self._drop_if_nothing_left(fx, now, group)
        return fx.result((ErrorCode.NONE, errors))

    def delete_topic_offsets(self, now: int, topic: str) -> Result[int]:
        """A topic was deleted: every group's offsets for it go (tombstones), those open
        transactions hold included, as in Kafka's onPartitionsDeleted; a group left Empty
        with none, as after OffsetDelete."""
        fx = Effects()
        deleted = 0
        pending = self.offsets.pending
        held = pending.held_for_topic(topic) if pending is not None else set()
        groups = dict.fromkeys([*self.offsets.offsets, *sorted(g for g, _ in held)])
        for gid in groups:
            if self.unavailable(gid) is not None:
                continue
            partition = self.partition_for(gid)
            tps = {tp for tp in self.offsets.all_for(gid) if tp[0] == topic}
            tps.update(tp for g, tp in held if g == gid)
            for tp in sorted(tps):
                self.offsets.delete(fx, partition, gid, tp)
                deleted += 1
            group = self.groups.groups.get(gid)
            if group is not None and not is_consumer_group(group):
                self._drop_if_nothing_left(fx, now, group)
        return fx.result(deleted)

    def _drop_if_nothing_left(self, fx: Effects, now: int, group: Group) -> None:
        """After offsets were deleted: an Empty classic group that had members (its metadata
        is in the log) stays until the next retention check removes it, as Kafka's
        cleanupGroupMetadata does, listed and deletable meanwhile. One that only ever stored
        offsets goes at once: nothing of it is left in the log, so replaying the log would
        not bring it back (Kafka's replay would, from the deleted offsets' records)."""
        if (
            group.state is GroupState.EMPTY
            and not group.in_log
            and not self.offsets.has_offsets(group.group_id)
        ):
            self.groups.expire(fx, now, group)


def metadata_too_long(metadata: str, limit: int) -> bool:
    """Whether commit metadata is over offset.metadata.max.bytes. Kafka compares Java's
    String.length(), in UTF-16 code units, with the limit (despite its name, it does not
    count UTF-8 bytes). A code point is at most two units, so short strings need no encoding
    to tell."""
    return len(metadata) * 2 > limit and len(metadata.encode("utf-16-le")) // 2 > limit


def _validate_consumer_commit(
    group: ConsumerGroup, epoch: int, member_id: str, version: int
) -> ErrorCode | None:
    """Kafka's OffsetCommit rules for a consumer group (4.2: the exact member epoch)."""
    if epoch < 0 and not group.members:
        return None  # the admin client, or a consumer assigning itself partitions
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not member.uses_classic and version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if epoch != member.epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic else ErrorCode.STALE_MEMBER_EPOCH
    return None


def _subscribed_topics(subscriptions: list[bytes] | None) -> set[str] | None:
    """The topics a classic consumer group's members subscribe to, or None when they cannot
    be known. As Kafka's ClassicGroup.computeSubscribedTopics, each subscription is read in
    the version-0 layout that every version starts with (a future version still names its
    topics), and one that does not parse leaves the topics unknown: the group then counts as
    subscribed to every topic, so none of its offsets is deleted or expires behind it."""
    if subscriptions is None:
        return None
    topics: set[str] = set()
    for raw in subscriptions:
        try:
            topics.update(_v0_topics(raw))
        except (struct.error, ValueError):
            return None
    return topics


def _v0_topics(raw: bytes) -> list[str]:
    # version (int16), topics (array of int16-length strings), user_data (nullable bytes);
    # any later fields are not read.
    (count,) = _I32.unpack_from(raw, 2)
    if count < 0:
        raise ValueError("the topics array is not nullable")
    at, topics = 6, []
    for _ in range(count):
        (length,) = _I16.unpack_from(raw, at)
        if length < 0 or at + 2 + length > len(raw):
            raise ValueError("a topic name past the end")
        topics.append(raw[at + 2 : at + 2 + length].decode(errors="replace"))
        at += 2 + length
    (length,) = _I32.unpack_from(raw, at)
    if at + 4 + max(length, 0) > len(raw):
        raise ValueError("user data past the end")
    return topics
