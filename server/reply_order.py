"""A connection's answers, in the order its requests came.

Kafka answers a connection's requests in order, so each request takes a slot: an answer ready
at once goes out (corked until the end of the read when several arrive together); a parked
reply (JoinGroup, a follower's SyncGroup, a Fetch long-poll, a commit waiting for its records
to be durable) holds back the answers behind it until it resolves, and `flush` then sends
every finished one at the head. KafkaConnection (connection.py) takes these from this mixin;
reading and dispatching requests stay there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from minicoord.server.answers import Answer, ParkedReply

if TYPE_CHECKING:
    from minicoord.protocol.apis import ApiSpec
    from minicoord.protocol.headers import RequestHeader
    from minicoord.server.broker import Broker

P = TypeVar("P", bound=ParkedReply)

# Answers held for the end of a turn are written early once they reach this size.
CORK_LIMIT = 64 * 1024

# Bits of a connection's `_holds`. Back-pressure: reading stops while too many answers are
# pending or while the transport's write buffer is over its high-water mark (a client not
# reading). HALF_CLOSED: the client shut its side after its requests; the connection is
# closed once their answers are out.
READ_PAUSED = 1
WRITE_PAUSED = 2
DRAINING = 4
HALF_CLOSED = 8


class ReplyOrder:
    # Slots are KafkaConnection's; these are the ones read and written here.
    __slots__ = ()
    _queue: list[Answer | ParkedReply] | None
    _corked: list[bytes] | None
    _corked_bytes: int
    _holds: int
    _observe: Callable[[Any], None] | None
    broker: Broker
    closed: bool
    quiet_sweeps: int
    transport: asyncio.Transport | None

    if TYPE_CHECKING:

        def abort(self, reason: str, logged: bool = True, level: int = logging.WARNING) -> None: ...

        def _maybe_resume(self) -> None: ...

    def park(self, header: RequestHeader, spec: ApiSpec, build: Callable) -> ParkedReply:
        parked = ParkedReply(self, header, spec, build)
        parked.observe = self._observe
        return parked

    def adopt(self, parked: P) -> P:
        """`parked`, made by a handler for this connection's current request, as its reply."""
        parked.observe = self._observe
        return parked

    def hold(self, header: RequestHeader, spec: ApiSpec, response: Any) -> ParkedReply:
        """A reply whose response is known now but sent only when resolved (once the records
        it acknowledges are as durable as the flush policy says)."""
        parked = ParkedReply(self, header, spec, None, response)
        parked.observe = self._observe
        return parked

    def _enqueue(self, slot: Answer | ParkedReply) -> None:
        """Answer now if nothing is held back and the answer is ready; else hold it in order."""
        queue = self._queue
        if queue is None:
            data = slot.data if isinstance(slot, ParkedReply) else slot
            if data is not None:
                self._emit(data)
                return
            # Alone and not ready (a commit waiting for its records): nothing to send yet.
            self._queue = [slot]
            if not self.broker.peak_pending:
                self.broker.peak_pending = 1
            return
        queue.append(slot)
        if len(queue) > self.broker.peak_pending:
            self.broker.peak_pending = len(queue)
        self.flush()

    def _emit(self, data: Answer) -> None:
        if self.closed or self.transport is None:
            return
        self.quiet_sweeps = 0
        corked = self._corked
        if corked is None:
            if type(data) is list:
                self._write(data)
            else:
                self.transport.write(data)
            return
        if type(data) is list:
            corked.extend(data)
            self._corked_bytes += sum(len(part) for part in data)
        else:
            corked.append(data)  # type: ignore[arg-type]
            self._corked_bytes += len(data)
        if self._corked_bytes < CORK_LIMIT:
            return
        # A big burst: write what we have, so the transport's flow control (pause_writing)
        # can stop us reading before answers pile up in memory.
        self._write(corked)
        corked.clear()
        self._corked_bytes = 0

    def _write(self, buffers: list[bytes]) -> None:
        """One write (vectored when several buffers) of answers in order."""
        assert self.transport is not None
        if len(buffers) == 1:
            self.transport.write(buffers[0])
        elif sum(len(b) for b in buffers) < CORK_LIMIT:
            # Small answers are cheaper joined than handed over one by one.
            self.transport.write(b"".join(buffers))
        else:
            self.transport.writelines(list(buffers))

    def flush(self) -> None:
        """Send every finished answer at the head of the held-back queue, in order."""
        queue = self._queue
        if queue is None:
            return
        if self.closed or self.transport is None:
            self._queue = None
            return
        done = 0
        for head in queue:
            if (head.data if isinstance(head, ParkedReply) else head) is None:
                break
            done += 1
        ready = queue[:done]
        del queue[:done]
        for head in ready:
            self._emit(head.data if isinstance(head, ParkedReply) else head)  # type: ignore[arg-type]
        if not queue:
            self._queue = None
            if self._holds & HALF_CLOSED:
                self.abort("the client closed its side; its answers are sent", level=logging.DEBUG)
                return
        if ready and self._holds & READ_PAUSED:
            self._maybe_resume()
