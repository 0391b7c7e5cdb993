"""The node's shared state and the bridge between the sans-IO coordinator and the event loop.

`apply` is the one place a coordinator result takes effect. Records first, then replies:
the records of every request handled in one turn of the event loop are appended together
(group commit: one batch per offsets partition), made durable as the flush policy promises,
and only then are the replies of those requests released, in the order they were made. A
result with no records, arriving while nothing is waiting, is answered at once. The clock is
injected so the same code runs under tests.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from minicoord.protocol.records import Record
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.results import Result
from minicoord.server.faults import Faults
from minicoord.server.handlers import HandlerRegistry
from minicoord.server.topics import TopicRegistry
from minicoord.storage.store import InMemoryStore, RecordStore

if TYPE_CHECKING:
    from minicoord.server.connection import KafkaConnection
    from minicoord.server.metrics import Metrics

log = logging.getLogger("minicoord.broker")

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
        self.faults = Faults()
        self.advertised = config.advertised_address()
        # Set by the server when metrics are on; the connection feeds it per request.
        self.metrics: Metrics | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        # Group commit: what the current turn of the loop produced, waiting for one append.
        self._pending_records: list[tuple[int, Record]] = []
        self._pending_replies: list[tuple[Any, Any]] = []
        self._flush_scheduled = False
        self._syncing = False
        # fsync runs here, off the event loop; one thread keeps syncs in order.
        self._sync_pool = concurrent.futures.ThreadPoolExecutor(1, "minicoord-fsync")

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.coordinator.start(self.now())
        self._arm_timer()

    def now(self) -> int:
        return self.clock()

    # -- applying coordinator results -------------------------------------------------------

    def apply(self, result: Result[T], reply: Any = None) -> T:
        """Persist a result's records, then release its replies (and `reply`, with its value)."""
        if reply is not None:
            result.replies.append((reply, result.value))
        if result.records or self._pending_replies or self._flush_scheduled or self._syncing:
            self._pending_records.extend(result.records)
            self._pending_replies.extend(result.replies)
            self._schedule_flush()
        else:
            _release(result.replies)
        self._arm_timer()
        return result.value

    def _schedule_flush(self) -> None:
        if self._flush_scheduled or self._syncing:
            return
        if self._loop is None:
            self._flush()
            return
        self._flush_scheduled = True
        # After every callback already queued for this turn (the other requests that arrived
        # together), so they share one append.
        self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        records, self._pending_records = self._pending_records, []
        replies, self._pending_replies = self._pending_replies, []
        touched: set[int] = set()
        if records:
            try:
                touched = self.store.append(records, self.now())
            except OSError as exc:
                _halt(f"cannot write the offsets log: {exc}")
        if touched and self.store.needs_sync and self._loop is not None:
            self._syncing = True
            future = self._loop.run_in_executor(self._sync_pool, self.store.sync, touched)
            future.add_done_callback(lambda f: self._after_sync(f, replies))
            return
        _release(replies)

    def _after_sync(self, future: asyncio.Future[None], replies: list[tuple[Any, Any]]) -> None:
        self._syncing = False
        if future.cancelled() or future.exception() is not None:
            _halt(f"cannot fsync the offsets log: {future.exception()!r}")
        _release(replies)
        if self._pending_records or self._pending_replies:
            self._schedule_flush()

    # -- timers ---------------------------------------------------------------------------

    def call_later(self, delay_ms: int, callback: Callable[[], Any]) -> asyncio.TimerHandle:
        assert self._loop is not None, "broker is not attached to a loop"
        return self._loop.call_later(delay_ms / 1000, callback)

    def rearm(self) -> None:
        """Re-arm the coordinator's timer after state changed outside `apply` (loading)."""
        self._arm_timer()

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

    @property
    def busy(self) -> bool:
        """Records or replies still on their way through the write path."""
        return bool(
            self._flush_scheduled or self._syncing or self._pending_records or self._pending_replies
        )

    async def drain(self, timeout: float) -> bool:
        """Wait (bounded) for the write path to empty: every persisted request answered."""
        deadline = time.monotonic() + timeout
        while self.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return not self.busy

    def close(self) -> None:
        """Write out anything still waiting and close the store (a clean shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None
        if self._pending_records or self._pending_replies:
            self._flush()
        self._sync_pool.shutdown(wait=True)
        self.store.close()


def _release(replies: list[tuple[Any, Any]]) -> None:
    for ticket, outcome in replies:
        ticket.resolve(outcome)


def _halt(reason: str) -> None:
    # State already reflects records that could not be made durable; acknowledging anything
    # now could lose a commit the client believes is safe. Like Kafka on a log directory
    # failure, stop the process; a restart recovers from what is on disk.
    log.critical("%s; halting", reason)
    logging.shutdown()
    os._exit(70)
