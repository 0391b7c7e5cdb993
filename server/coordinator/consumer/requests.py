"""What a ConsumerGroupHeartbeat asks and is answered, as the coordinator sees them (the
handler translates the wire messages), Kafka's static checks of a request, and the member ids
the server hands out."""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
)

if TYPE_CHECKING:
    from minicoord.server.coordinator.consumer.targets import Describable


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topics: tuple[str, ...] | None = None
    regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    describable: Describable = None  # the handler's, with an authorizer


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class HeartbeatOutcome:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def new_member_id() -> str:
    """Kafka's Uuid text form: URL-safe base64 of 16 random bytes, no padding, no '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def validate(req: HeartbeatRequest, version: int, config: Config) -> None:
    """Kafka's static checks of a heartbeat, in its order; HeartbeatError on the first."""
    epoch = req.member_epoch
    if not req.member_id.strip() and (version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH):
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if not req.group_id.strip():
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST,
                "RebalanceTimeoutMs must be provided in first request.",
            )
        if req.owned is None or any(req.owned.values()):
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
            )
        if req.topics is None and req.regex is None:
            raise HeartbeatError(
                ErrorCode.INVALID_REQUEST,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining.",
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in (
        assignors := config.consumer_assignors
    ):
        raise HeartbeatError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )
