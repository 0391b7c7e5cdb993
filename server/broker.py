"""The node's shared state and the bridge between the sans-IO cores and the event loop.

`apply` is the one place a coordinator result takes effect, and the write path is one for
everything the node persists: the coordinator's `__consumer_offsets` records, producers'
batches (accepted into their logs by the data plane as requests arrive) and cluster metadata
records. At the end of each turn of the event loop, every log touched in that turn is written
once (group commit), made durable as the flush policy promises, committed (its high watermark
moves and waiting fetches wake), and only then are the replies of those requests released,
in the order they were made. A result with nothing to persist, arriving while nothing is
waiting, is answered at once. The clock is injected so the same code runs under tests.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import functools
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from minicoord.protocol.records import Record
from minicoord.server.cluster_metadata import ClusterMetadata
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.results import Effects, Result
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.plane import DataPlane
from minicoord.server.features import Features
from minicoord.server.handlers import HandlerRegistry
from minicoord.server.request_log import Refusals, RequestLog
from minicoord.server.topics import OFFSETS_TOPIC, TopicRegistry
from minicoord.storage.log import FlushPolicy, LogManager
from minicoord.storage.partition_log import PartitionLog, WriteMark

if TYPE_CHECKING:
    from minicoord.server.connection import KafkaConnection
    from minicoord.server.data.shares import Shares
    from minicoord.server.faults import Faults
    from minicoord.server.handlers.base import Channel
    from minicoord.server.metrics import Metrics
    from minicoord.server.security.acls import AclStore
    from minicoord.server.security.sasl import UserStore
    from minicoord.server.transactions.coordinator import Ended, TransactionCoordinator

log = logging.getLogger("minicoord.broker")

T = TypeVar("T")
FSYNC = FlushPolicy.FSYNC


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a random (version 4) UUID in URL-safe base64, without padding.

    Its bits are set here, not by uuid.uuid4: the uuid module is 280 KiB of an idle server."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class Broker(ClusterMetadata):
    def __init__(
        self,
        config: Config,
        *,
        logs: LogManager | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        # The clock itself, called as `now()`: a method around it would cost every request a
        # second call.
        self.now: Callable[[], int] = clock
        self.logs = logs if logs is not None else LogManager(None)
        # One timer queue for the coordinator and the data path, fired from one loop timer.
        self.timers = TimerQueue()
        self.topics = TopicRegistry(config)
        self.coordinator = GroupCoordinator(config, timers=self.timers, topics=self.topics)
        self.data = DataPlane(config, self.logs, self.topics, self.timers)
        self.handlers = HandlerRegistry.default()
        # `authorizer` is None without authorizer.class.name, which is what handlers test
        # before checking.
        self.authorizer: AclStore | None = self.acls if config.authorizer_enabled else None
        self.features = Features()
        # group.coordinator.rebalance.protocols names `consumer` and group.version is at
        # least 1: read by every ConsumerGroupHeartbeat, so worked out at each change.
        self.consumer_protocol = config.consumer_protocol_enabled
        self.cluster_id = new_cluster_id()
        # Open connections, as the keys of a dict rather than a set: a set grows its table
        # fourfold below 50,000 entries, so ten thousand connections held 52-104 bytes each
        # of table against a dict's 29.
        self.connections: dict[KafkaConnection, None] = {}
        # Most answers ever pending at once on one connection: what back-pressure
        # (queued.max.requests) keeps within its limit. Kept here rather than per connection,
        # where it would be a slot in each of thousands.
        self.peak_pending = 0
        # Made by the first Controller (faults.py), the only way to add a rule.
        self.faults: Faults | None = None
        self.users: UserStore | None = None
        # Set by the server when metrics are on; the connection feeds it per request.
        self.metrics: Metrics | None = None
        # The per-request DEBUG lines: None unless minicoord.requests is at DEBUG (see
        # request_log.refresh), so that off they cost the connection one attribute read.
        self.request_log: RequestLog | None = None
        self.refusals = Refusals()
        self.coordinator.on_refusal = self.refusals.consumer_group_heartbeat
        # From the start until every log found on disk has loaded (loading.py).
        self.loading_logs = False
        self._metadata_log: PartitionLog | None = None
        # (records read back, records skipped as undecodable) by `open_metadata`.
        self._metadata_replayed = (0, 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        # Group commit: what the current turn of the loop produced, waiting for one write.
        # A coordinator call may append its records here itself (commit_one); its answer then
        # waits behind them (`write_before_answer`, or `apply` of a result with none of its own).
        self.pending_records: list[tuple[int, Record]] = []
        self._pending_replies: list[tuple[Any, Any]] = []
        self._flush_scheduled = False
        self._syncing = False
        # Connections that read in this turn: their answers are written when it ends.
        self._corked: list[KafkaConnection] = []
        # fsync runs here, off the event loop; one thread keeps syncs in order.
        self._sync_pool = concurrent.futures.ThreadPoolExecutor(1, "minicoord-fsync")

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        now = self.now()
        self.coordinator.start(now)
        config = self.config
        self._every(
            "log-retention", config.log_retention_check_interval_ms, self.data.apply_retention, now
        )
        self._every(
            "producer-expiration",
            config.producer_id_expiration_check_interval_ms,
            self.data.expire_producers,
            now,
        )
        self._arm_timer()

    # -- producers and transactions ----------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before: from a block claimed in the metadata log,
        which an answer naming the id waits for (as any answer waits for the turn's records)."""
        ids = self.data.producer_ids
        if ids.needs_block():
            ids.claim_block()
            self.persist_metadata([ids.block_record(self.config.broker_id)])
        return ids.allocate()

    @functools.cached_property
    def shares(self) -> Shares:
        """Share sessions and share partitions (KIP-932), made by the first share fetch."""
        from minicoord.server.data.shares import Shares

        configs = self.coordinator.group_configs
        default_lock = self.config.group_share_record_lock_duration_ms
        shares = Shares(
            self.config,
            self.timers,
            configs.share_reset,
            lambda group: configs.share_lock_ms.get(group, default_lock),
        )
        # Kept across restarts on a data dir (data/share_state.py).
        shares.keep = not self.logs.in_memory
        # A deleted share group's delivery state goes with it.
        self.coordinator.shares.on_deleted = lambda group: shares.drop(lambda k: k[0] != group)
        return shares

    def persist_shares(self) -> bool:
        """Append the share partitions' changed state (data/share_state.py) and have it
        written; True if any was (an answer applied after this waits for it)."""
        if "shares" not in self.__dict__ or not self.shares.dirty:
            return False
        from minicoord.server.data.share_state import persist

        if not persist(self):
            return False
        self.apply(Result(None, [], []))
        return True

    @functools.cached_property
    def transactions(self) -> TransactionCoordinator:
        """The transaction coordinator, made (with its timeout checks) by the first request
        for a transactional id: a server no transactional producer uses loads none of it."""
        from minicoord.server.transactions.coordinator import TransactionCoordinator

        config = self.config
        coordinator = TransactionCoordinator(
            config.transaction_max_timeout_ms,
            self.allocate_producer_id,
            config.transactional_id_expiration_ms,
            # The count the topic was made with, once it is (as for groups).
            self.topics.transaction_state.partitions,
        )
        coordinator.loading = self.loading_logs
        self.data.transactions = coordinator
        self._every(
            "transaction-timeouts",
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.abort_timed_out_transactions,
            self.now(),
        )
        self._arm_timer()
        return coordinator

    @property
    def loaded_transactions(self) -> TransactionCoordinator | None:
        """The transaction coordinator if something has made it (None: no transactional id
        has been seen, and none was read back at start)."""
        return self.__dict__.get("transactions")

    def persist_transactions(self) -> None:
        """Append the `__transaction_state` records of the ids whose state changed; an answer
        applied after this waits for them."""
        from minicoord.server.transactions.finish import persist

        persist(self)

    def end_transaction(self, ended: Ended, reply: Any = None) -> None:
        """End a transaction in Kafka's two steps (transactions/finish.py); `reply` is sent
        once it has completed."""
        from minicoord.server.transactions.finish import end

        end(self, ended, reply)

    def abort_timed_out_transactions(self, now: int) -> None:
        for ended in self.transactions.abort_timed_out(now):
            log.info(
                "transaction %r of producer %d timed out: aborted, epoch bumped to %d",
                ended.transactional_id,
                ended.producer_id,
                ended.epoch,
            )
            self.end_transaction(ended)
        self.transactions.expire_ids(now)
        self.persist_transactions()
        self.apply(Result(None, [], []))

    # -- applying results -------------------------------------------------------------------

    def apply(self, result: Result[T], reply: Any = None) -> T:
        """Persist a result's records, then release its replies (and `reply`, with its value).

        Batches the data plane accepted in this turn count as records to persist: a reply
        applied after them waits for them.
        """
        if reply is not None:
            result.replies.append((reply, result.value))
        # Anything on its way to the log, records appended in place (commit_one) included.
        if result.records or self.busy:
            self.pending_records.extend(result.records)
            self._pending_replies.extend(result.replies)
            self._schedule_flush()
        else:
            _release(result.replies)
        self._arm_timer()
        return result.value

    def settled(self, result: Result[Any]) -> bool:
        """Whether a result can be answered at once, without a parked reply: it persists and
        releases nothing, and nothing before it is still on its way to the log (an answer
        must not overtake the records of a request that came earlier)."""
        if result.records or result.replies or self.busy:
            return False
        self._arm_timer()
        return True

    # -- answers ---------------------------------------------------------------------------

    def cork(self, conn: KafkaConnection) -> bool:
        """Hold `conn`'s answers until the end of this turn of the loop; False without a loop.

        Every connection read in a turn is answered in one burst after the last read, rather
        than each as it is handled: the clients woken by their answers then no longer
        preempt the server halfway through the reads already waiting. On two cores, 100
        members back to back: 1.18x the heartbeats and 1.24x the ConsumerGroupHeartbeats per
        second of the same server answering each read at once (`bench lean`, rounds
        alternating between the two).
        """
        loop = self._loop
        if loop is None:
            return False
        if not self._corked:
            loop.call_soon(self.uncork)
        self._corked.append(conn)
        return True

    def uncork(self) -> None:
        """End the turn: write the records its requests persist, then every corked
        connection's answers. Called when the turn ends, or at once for a shutdown about to
        close the connections."""
        corked, self._corked = self._corked, []
        if self._flush_scheduled:
            # First, so that answers given on the promise of `write_before_answer` follow
            # their records.
            try:
                self._flush()
            except Exception:
                # Those answers are corked now; sending them would acknowledge records that
                # may not be written, and holding them would hang their connections.
                log.exception("writing the turn's records failed")
                halt("cannot write the turn's records")
        for conn in corked:
            conn.uncork()

    def write_before_answer(self, conn: Channel) -> bool:
        """Whether an answer `conn` is given now will reach its client only after the records
        pending now are as durable as the flush policy says, with nothing to wait for: then a
        handler may return that answer as it is, without a parked reply. True when the turn's
        end, which writes before it answers, holds `conn`'s answers and no fsync is needed;
        the write is then scheduled."""
        if self.logs.policy is FSYNC or not conn.corked:
            return False
        if not self._flush_scheduled:
            self._schedule_flush()
        return True

    def _schedule_flush(self) -> None:
        if self._flush_scheduled or self._syncing:
            return
        if self._loop is None:
            self._flush()
            return
        self._flush_scheduled = True
        if self._corked:
            # The turn's end is queued already (uncork), and writes before it answers.
            return
        # After every callback already queued for this turn (the other requests that arrived
        # together), so they share one write.
        self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        # The turn's end may have written it already.
        if self._flush_scheduled:
            self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        records, self.pending_records = self.pending_records, []
        replies, self._pending_replies = self._pending_replies, []
        marks: list[tuple[PartitionLog, WriteMark]] = []
        try:
            if records:
                self._append_coordinator_records(records)
            marks = self.logs.write_out()
        except OSError as exc:
            halt(f"cannot write a log: {exc}")
        if marks and self.logs.needs_sync and self._loop is not None:
            self._syncing = True
            future = self._loop.run_in_executor(self._sync_pool, self.logs.sync, marks)
            future.add_done_callback(lambda f: self._after_sync(f, marks, replies))
            return
        self._commit(marks, replies)

    def _append_coordinator_records(self, records: list[tuple[int, Record]]) -> None:
        """One batch per touched offsets partition."""
        by_partition: dict[int, list[Record]] = {}
        for partition, record in records:
            batch = by_partition.get(partition)
            if batch is None:
                batch = by_partition[partition] = []
            batch.append(record)
        offsets = self.topics.offsets
        if not self.topics.offsets_topic_exists:
            # Written to without a FindCoordinator (embedded use).
            self.create_offsets_topic(records[0][0])
        now = self.now()
        for partition, batch in by_partition.items():
            state = self.data.partition(offsets, partition)
            assert state is not None, f"offsets partition {partition} is not loaded"
            state.log.append(batch, now)
            self.logs.touched(OFFSETS_TOPIC, partition, state.log)

    def _after_sync(
        self,
        future: asyncio.Future[None],
        marks: list[tuple[PartitionLog, WriteMark]],
        replies: list[tuple[Any, Any]],
    ) -> None:
        self._syncing = False
        if future.cancelled() or future.exception() is not None:
            halt(f"cannot fsync a log: {future.exception()!r}")
        self._commit(marks, replies)
        if self.pending_records or self._pending_replies or self.logs.has_touched:
            self._schedule_flush()

    def _commit(
        self, marks: list[tuple[PartitionLog, WriteMark]], replies: list[tuple[Any, Any]]
    ) -> None:
        woken = self.data.committed(marks)
        _release(replies)
        _release(woken.replies)

    def release(self, fx: Effects) -> None:
        """Effects with no records of their own (fetches answered after a topic deletion)."""
        self.apply(fx.result(None))

    # -- timers ---------------------------------------------------------------------------

    def call_later(self, delay_ms: int, callback: Callable[[], Any]) -> asyncio.TimerHandle:
        assert self._loop is not None, "broker is not attached to a loop"
        return self._loop.call_later(delay_ms / 1000, callback)

    def rearm(self) -> None:
        """Re-arm the timer after timers changed outside `apply` (loading, a parked fetch)."""
        self._arm_timer()

    def _arm_timer(self) -> None:
        if self._loop is None:
            return
        timers = self.timers
        if self._timer_at is not None and not timers.changed:
            # Nothing scheduled or cancelled since the armed wake-up was set: it is still the
            # earliest. (Every request that writes or parks passes here.)
            return
        timers.changed = False
        deadline = timers.next_deadline()
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
        result = self.coordinator.advance(self.now())
        self.persist_shares()  # records whose locks ran out are available again
        self.apply(result)

    def _every(self, key: str, interval_ms: int, work: Callable[[int], object], now: int) -> None:
        """Run `work(now)` every `interval_ms` from `now`, on the one timer queue (topic
        retention, producer expiry)."""

        def fire(at: int) -> Effects:
            work(at)
            self._every(key, interval_ms, work, at)
            return Effects()

        self.timers.schedule((key,), now + interval_ms, fire)

    @property
    def busy(self) -> bool:
        """Records or replies still on their way through the write path."""
        return bool(
            self._flush_scheduled
            or self._syncing
            or self.pending_records
            or self._pending_replies
            or self.logs.has_touched
        )

    async def drain(self, timeout: float) -> bool:
        """Wait (bounded) for the write path to empty: every persisted request answered."""
        deadline = time.monotonic() + timeout
        while self.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return not self.busy

    def close(self) -> None:
        """Write out anything still waiting and close the logs (a clean shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None
        if self.pending_records or self._pending_replies or self.logs.has_touched:
            self._flush()
        self._sync_pool.shutdown(wait=True)
        self.logs.close()


def _release(replies: list[tuple[Any, Any]]) -> None:
    for ticket, outcome in replies:
        ticket.resolve(outcome)


def halt(reason: str) -> NoReturn:
    # State already reflects records that could not be made durable; acknowledging anything
    # now could lose a commit or a message the client believes is safe. Like Kafka on a log
    # directory failure, stop the process; a restart recovers from what is on disk.
    log.critical("%s; halting", reason)
    logging.shutdown()
    os._exit(70)
