"""What a ConsumerGroupHeartbeat asks and is answered, as the coordinator sees them (the
handler translates the wire messages), and the member ids the server hands out."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.consumer.group import Assignment


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
