"""The node's shared state and the bridge between the sans-IO coordinator and the event loop.

`apply` is the one place a coordinator result takes effect: its records are appended to the
store first, then its replies are released, then the coordinator's next timer deadline is
(re)armed on the loop. The clock is injected so the same code runs under tests.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers import HandlerRegistry
from minicoord.server.topics import TopicRegistry
from minicoord.storage.store import InMemoryStore, RecordStore

if TYPE_CHECKING:
    from minicoord.server.connection import KafkaConnection

T = TypeVar("T")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a random UUID in URL-safe base64, without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Broker:
    def __init__(
        self,
        config: Config,
        *,
        store: RecordStore | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.topics = TopicRegistry(config.offsets_topic_num_partitions)
        self.coordinator = GroupCoordinator(config)
        self.store: RecordStore = store if store is not None else InMemoryStore()
        self.handlers = HandlerRegistry.default()
        self.cluster_id = new_cluster_id()
        self.connections: set[KafkaConnection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._arm_timer()

    def now(self) -> int:
        return self.clock()

    def apply(self, result: Result[T]) -> T:
        if result.records:
            self.store.append(result.records)
        for ticket, outcome in result.replies:
            ticket.resolve(outcome)
        self._arm_timer()
        return result.value

    def call_later(self, delay_ms: int, callback: Callable[[], Any]) -> asyncio.TimerHandle:
        assert self._loop is not None, "broker is not attached to a loop"
        return self._loop.call_later(delay_ms / 1000, callback)

    def _arm_timer(self) -> None:
        if self._loop is None:
            return
        deadline = self.coordinator.next_deadline()
        if deadline is None:
            return
        if self._timer_at is not None and self._timer_at <= deadline:
            return  # the armed wake-up comes first; it will re-arm for later deadlines
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0, deadline - self.now()) / 1000
        self._timer = self._loop.call_later(delay, self._on_timer)
        self._timer_at = deadline

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self.apply(self.coordinator.advance(self.now()))

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None
