"""The group admin APIs (describe, list, delete), read and written through the coordinator's
managers. A mixin of GroupCoordinator (coordinator.py), whose request paths these are not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.classic.manager import GroupManager
from minicoord.server.coordinator.group import is_consumer_group
from minicoord.server.coordinator.offsets import OffsetsManager
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.server.coordinator.results import Effects, GroupDescription, GroupListing, Result

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.group import ConsumerGroup
    from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager
    from minicoord.server.coordinator.share.groups import ShareGroup, ShareGroups


class GroupAdmin:
    groups: GroupManager
    consumers: ConsumerGroupManager
    shares: ShareGroups
    offsets: OffsetsManager
    partition_status: dict[int, PartitionStatus]

    if TYPE_CHECKING:
        from minicoord.server.coordinator.consumer.describe import ConsumerGroupDescription

        # Provided by GroupCoordinator.
        def partition_for(self, group_id: str) -> int: ...

        def unavailable(self, group_id: str) -> ErrorCode | None: ...

        def consumer_group(self, group_id: str) -> ConsumerGroup | None: ...

        def share_group(self, group_id: str) -> ShareGroup | None: ...

    def consumer_group_describe(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        # Loaded by the first ConsumerGroupDescribe, not at start: most servers never get one.
        from minicoord.server.coordinator.consumer.describe import (
            ConsumerGroupDescription,
            describe_consumer_group,
        )

        out = []
        for gid in group_ids:
            error = self.unavailable(gid)
            if not gid:
                out.append(ConsumerGroupDescription(gid, ErrorCode.INVALID_GROUP_ID))
            elif error is not None:
                out.append(ConsumerGroupDescription(gid, error))
            elif self.share_group(gid) is not None:
                message = f"Group {gid} is not a consumer group."
                out.append(ConsumerGroupDescription(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
            else:
                out.append(describe_consumer_group(self.consumers, gid))
        return out

    def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        out = []
        for gid in group_ids:
            error = self.unavailable(gid)
            if error is not None:
                out.append(GroupDescription(gid, error, "", "", ""))
            elif self.consumer_group(gid) is not None or self.share_group(gid) is not None:
                # The classic API does not describe other groups: Kafka answers "Dead".
                out.append(
                    GroupDescription(
                        gid,
                        ErrorCode.GROUP_ID_NOT_FOUND,
                        "Dead",
                        "",
                        "",
                        message=f"Group {gid} is not a classic group.",
                    )
                )
            else:
                out.append(self.groups.describe(gid))
        return out

    def list_groups(
        self, states: set[str] | None = None, types: set[str] | None = None
    ) -> tuple[ErrorCode, list[GroupListing]]:
        if PartitionStatus.LOADING in self.partition_status.values():
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted_states = {s.strip().lower() for s in states} if states else None
        # Kafka trims the states asked for, not the types (Group.GroupType.parse).
        wanted_types = {t.lower() for t in types} if types else None
        listings = []
        for group in self.groups.groups.values():
            if is_consumer_group(group):
                listing = GroupListing(group.group_id, "consumer", group.state.value, "consumer")
            else:
                listing = GroupListing(
                    group.group_id, group.protocol_type or "", group.state.value, "classic"
                )
            if wanted_states is not None and listing.state.lower() not in wanted_states:
                continue
            if wanted_types is not None and listing.group_type not in wanted_types:
                continue
            if self.unavailable(listing.group_id) is None:
                listings.append(listing)
        if "shares" in self.__dict__:
            for share in self.shares.groups.values():
                listing = GroupListing(share.group_id, "share", share.state, "share")
                if wanted_states is not None and listing.state.lower() not in wanted_states:
                    continue
                if wanted_types is None or "share" in wanted_types:
                    listings.append(listing)
        return ErrorCode.NONE, listings

    def delete_groups(self, now: int, group_ids: list[str]) -> Result[list[ErrorCode]]:
        fx = Effects()
        errors = []
        # A group named twice is answered twice alike: Kafka checks every name against the
        # state before the request's deletions apply.
        decided: dict[str, ErrorCode] = {}
        for gid in group_ids:
            if gid in decided:
                errors.append(decided[gid])
                continue
            error = self.unavailable(gid)
            consumer = self.consumer_group(gid)
            if error is None and self.share_group(gid) is not None:
                error = self.shares.delete(gid)
            elif error is None and consumer is not None:
                if consumer.members:
                    error = ErrorCode.NON_EMPTY_GROUP
                else:
                    self.offsets.delete_group(fx, consumer.partition, gid)
                    self.consumers.delete(fx, consumer)
                    error = ErrorCode.NONE
            elif error is None:
                error = self.groups.delete(fx, now, gid)
                if error is ErrorCode.NONE:
                    self.offsets.delete_group(fx, self.partition_for(gid), gid)
            errors.append(error)
            decided[gid] = error
        return fx.result(errors)
