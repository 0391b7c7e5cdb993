"""Offsets partitions coming into service and going out of it: a replayed partition's groups
and offsets installed, a partition that cannot be read dropped, and the sessions of a
partition served again started afresh. A mixin of GroupCoordinator (coordinator.py), which
keeps which partitions are served (`partition_status`) and answers for the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minicoord.server.coordinator.classic.manager import GroupManager
from minicoord.server.coordinator.group import is_consumer_group
from minicoord.server.coordinator.offsets import OffsetsManager
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.server.coordinator.replay import PartitionReplay, rebuild_group
from minicoord.server.coordinator.results import Effects, Result

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.manager import ConsumerGroupManager


class PartitionLoading:
    groups: GroupManager
    consumers: ConsumerGroupManager
    offsets: OffsetsManager

    if TYPE_CHECKING:
        # Provided by GroupCoordinator.
        def partition_for(self, group_id: str) -> int: ...

        def set_partition_status(self, partition: int, status: PartitionStatus) -> None: ...

    def restart_sessions(self, partition: int, now: int) -> None:
        """Every member of the partition's groups starts a fresh session: its partition is
        served again after an injected NOT_COORDINATOR or load, during which no session ran
        (Kafka's onLoaded reschedules every member's session timeout the same way)."""
        for group in list(self.groups.groups.values()):
            if group.partition != partition:
                continue
            if is_consumer_group(group):
                for member in group.members.values():
                    self.consumers.schedule_session(group, member, now)
            else:
                self.groups.restart_sessions(group, now)

    def begin_loading(self, partition: int) -> None:
        self.set_partition_status(partition, PartitionStatus.LOADING)

    def finish_loading(self, replay: PartitionReplay, now: int) -> Result[None]:
        """Install a replayed partition's groups and offsets and start serving it (the result
        is to be applied once its log is installed)."""
        fx = Effects()
        partition = replay.partition
        replay.decode()
        for gid, value in replay.groups.items():
            self.groups.adopt(fx, rebuild_group(gid, partition, value, now), now)
        if replay.consumer_groups:
            from minicoord.server.coordinator.consumer.rebuild import rebuild_consumer_group

            for gid, records in replay.consumer_groups.items():
                consumer = rebuild_consumer_group(gid, partition, records)
                if consumer is not None:
                    self.consumers.adopt(consumer, now)
        for (gid, topic, index), committed in replay.offsets.items():
            self.offsets.restore(gid, (topic, index), committed)
            # Offsets without group metadata belong to a group that only stores offsets.
            if gid not in self.groups.groups:
                self.groups.get_or_create(gid, now)
        self.set_partition_status(partition, PartitionStatus.ACTIVE)
        return fx.result(None)

    def fail_loading(self, partition: int) -> None:
        """The partition's log cannot be read: its groups are COORDINATOR_NOT_AVAILABLE."""
        for gid in self.groups.drop_partition(partition):
            self.offsets.forget_group(gid)
        for gid, group in list(self.groups.groups.items()):
            if is_consumer_group(group) and group.partition == partition:
                for member_id in group.members:
                    self.consumers.cancel_member_timers(group, member_id)
                del self.groups.groups[gid]
        for gid in [g for g in self.offsets.offsets if self.partition_for(g) == partition]:
            self.offsets.forget_group(gid)
        self.set_partition_status(partition, PartitionStatus.FAILED)
