"""What the transaction handlers share: answering after the turn's writes, and the error an
older client understands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import RequestContext


def compatible(error: ErrorCode, version: int, fenced_from: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) as INVALID_PRODUCER_EPOCH below the version that knows it, as
    Kafka's KafkaApis answers older clients."""
    if error is ErrorCode.PRODUCER_FENCED and version < fenced_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def after_writes(ctx: RequestContext, result: Result[Any], build: Callable[[Any], Any]) -> Any:
    """The answer, sent once the result's records, and whatever the turn appended before it
    (producer id blocks, transaction markers), are as durable as the flush policy says."""
    parked = ctx.park(build)
    ctx.broker.apply(result, parked)
    return parked
