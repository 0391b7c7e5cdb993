"""Whether this coordinator can serve an offsets partition now, and the error Kafka answers
a group on one it cannot."""

from __future__ import annotations

from enum import Enum

from minicoord.protocol.errors import ErrorCode


class PartitionStatus(Enum):
    ACTIVE = "active"
    LOADING = "loading"  # replaying its log: COORDINATOR_LOAD_IN_PROGRESS
    FAILED = "failed"  # its log could not be read: COORDINATOR_NOT_AVAILABLE
    MOVED = "moved"  # another coordinator owns it: NOT_COORDINATOR


STATUS_ERROR = {
    PartitionStatus.LOADING: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    PartitionStatus.FAILED: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    PartitionStatus.MOVED: ErrorCode.NOT_COORDINATOR,
}
