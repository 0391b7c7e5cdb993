"""A server's background work: the log cleaner's rounds, closing idle connections, and (under
`log.flush.policy=none`) writing buffered records out once a second.

Server (app.py) takes these from this mixin and starts them as tasks; listening, starting
and stopping stay there.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING

from minicoord.server.broker import Broker, halt
from minicoord.server.config import Config
from minicoord.server.topics import OFFSETS_TOPIC
from minicoord.storage.log import LogManager

if TYPE_CHECKING:
    from minicoord.server.metrics import Metrics
    from minicoord.server.storage_thread import StorageThread
    from minicoord.storage.cleaner import CleanResult

log = logging.getLogger("minicoord.server")

# Under log.flush.policy=none, how often buffered records are written to the OS.
BUFFERED_WRITE_INTERVAL_S = 1.0


class BackgroundWork:
    # The Server state these read (set in its __init__).
    config: Config
    broker: Broker
    logs: LogManager
    metrics: Metrics | None
    loaded: asyncio.Event
    _storage: StorageThread

    async def compact(self) -> list[CleanResult]:
        """Clean every compacted log whose closed segments are dirty enough (one at a time).

        `__consumer_offsets` and topics with cleanup.policy=compact, each with its own
        min.cleanable.dirty.ratio, delete.retention.ms and min/max.compaction.lag.ms.
        """
        await self.loaded.wait()
        broker = self.broker
        results = []
        for state in list(broker.data.partitions.values()):
            topic = state.topic
            plog = state.log
            cfg = broker.topics.config_of(topic)
            # The offsets topic's ratio and tombstone retention are the broker's
            # (log.cleaner.*, set at start or at runtime), as for a topic without overrides.
            ratio, retention = cfg.min_cleanable_ratio, cfg.delete_retention_ms
            if topic.name == OFFSETS_TOPIC:
                min_lag, max_lag = 0, None
            elif not cfg.compact:
                continue
            else:
                min_lag, max_lag = cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms
            now = broker.now()
            cleanable = plog.cleanable(now, min_lag)
            cleanable = state.txns.stable(cleanable, plog.high_watermark)
            aborted = state.txns.aborted_ranges()
            if plog.dirty_ratio(cleanable) < ratio and not (
                max_lag is not None and plog.compaction_overdue(cleanable, now, max_lag)
            ):
                continue
            # Loaded by the first log that needs cleaning: a server whose logs never roll a
            # segment (most test servers) never does.
            from minicoord.storage.cleaner import prepare

            prepared = None
            plog.cleaning = True
            try:
                prepared = await self._storage.run(
                    prepare, plog, now, retention, cleanable, aborted
                )
                if prepared is None:
                    continue
                plog.replace_closed(prepared.closed, prepared.cleaned)
                state.txns.forget_aborted(prepared.dropped_aborts)
            except Exception as exc:
                log.exception("cleaning %s failed", plog.name)
                if isinstance(exc, OSError) and not self.logs.in_memory:
                    # The data directory failed under the cleaner (full, gone): as Kafka's
                    # cleaner takes the log directory offline and the broker halts, rather
                    # than serve on and log this every round. The log is as it was (the
                    # swaps are the commit points); a restart drops a half-made cleaning.
                    halt(f"cannot clean {plog.name}: {exc!r}")
                # Anything else (a corrupt batch) leaves the log as it was too: keep
                # serving, and try again at the next round.
                if prepared is not None:
                    prepared.abandon()  # swaps no longer matching the segments
                continue
            finally:
                plog.cleaning = False
            result = prepared.result
            if self.metrics is not None:
                self.metrics.on_compaction(result.records_before - result.records_after)
            log.info(
                "cleaned %s: %d segments, %d -> %d records, %d -> %d bytes in %.0f ms",
                result.name,
                result.segments_cleaned,
                result.records_before,
                result.records_after,
                result.bytes_before,
                result.bytes_after,
                result.seconds * 1000,
            )
            results.append(result)
        return results

    async def _clean_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000)
            await self.compact()

    async def _close_idle_periodically(self) -> None:
        """connections.max.idle.ms: close connections quiet for longer with nothing pending.

        A half-sent request that stopped making progress counts as quiet too.
        """
        limit_s = self.config.connections_max_idle_ms / 1000
        interval = min(max(limit_s / 4, 0.05), 30.0)
        # A connection's quiet_sweeps restarts at 0 when it reads or writes, and at least
        # `interval` passes between sweeps: after n + 1 sweeps it has been quiet for at least
        # n intervals, never less than the limit.
        closing_sweeps = math.ceil(limit_s / interval) + 1
        while True:
            await asyncio.sleep(interval)
            for conn in list(self.broker.connections):
                conn.quiet_sweeps += 1
                if conn.quiet_sweeps >= closing_sweeps and conn.idle:
                    reason = (
                        f"idle for more than connections.max.idle.ms="
                        f"{self.config.connections_max_idle_ms}"
                    )
                    if conn.mid_request:  # a request that stopped arriving: worth a warning
                        conn.abort(f"{reason}, part of a request unread")
                    else:
                        # A client that keeps a connection it does not use (librdkafka does)
                        # is no news: DEBUG, as Kafka logs its idle closes at TRACE.
                        conn.abort(reason, level=logging.DEBUG)

    async def _write_buffered_periodically(self) -> None:
        # On a fixed cadence, not a sleep after each write: the write's own time and a late
        # wake-up must not add up into more than a second of acknowledged records at risk.
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += BUFFERED_WRITE_INTERVAL_S
            await asyncio.sleep(max(0.0, due - loop.time()))
            try:
                self.logs.write_buffered()
            except OSError as exc:
                # As under the other policies: what was acknowledged cannot reach the disk
                # (full, gone). A writer that stopped here would leave the server
                # acknowledging from memory what no later write or clean shutdown saves.
                halt(f"cannot write a log: {exc}")
            due = max(due, loop.time() - BUFFERED_WRITE_INTERVAL_S)
