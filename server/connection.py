"""One client connection: frames in, responses out, in request order.

A thin asyncio Protocol around the sans-IO pieces: FrameReader cuts frames, the request header
picks the handler, kafka-python's generated class decodes the body, the handler answers.
Kafka answers a connection's requests in the order they came: the answers' side (a slot per
request, parked replies holding back those behind them) is reply_order.py's.

Input we cannot serve closes this connection with a log line naming the client and the
reason; nothing a client sends can raise out of here.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from minicoord.protocol.framing import (
    FrameReader,
    FrameTooLarge,
    NegativeFrameSize,
    whole_frame,
)
from minicoord.protocol.headers import (
    MalformedHeader,
    RequestHeader,
    parse_request_header,
    skip_tagged_fields,
)
from minicoord.protocol.validate import decode_whole, null_violation
from minicoord.server import request_log
from minicoord.server.answers import (
    API_VERSIONS_KEY,
    Answer,
    ParkedReply,
    api_versions_fallback,
    encode_response,
)
from minicoord.server.broker import Broker, halt
from minicoord.server.handlers.base import (
    ANONYMOUS,
    NO_RESPONSE,
    Handler,
    RequestContext,
)
from minicoord.server.reply_order import (
    DRAINING,
    HALF_CLOSED,
    READ_PAUSED,
    WRITE_PAUSED,
    ReplyOrder,
)

log = logging.getLogger("minicoord.connection")
T = TypeVar("T")

# SaslHandshake, SaslAuthenticate, AlterUserScramCredentials.
_SECRET_APIS = frozenset((17, 36, 51))
# Values thousands of connections hold alike (their client's host, our own address): one copy
# each, not one per connection. Bounded by clearing, which only forgets the sharing.
_SHARED: dict[Any, Any] = {}
# A read is dispatched straight from its bytes unless one of these holds.
_NOT_DIRECT = WRITE_PAUSED | DRAINING


def _shared(value: T) -> T:
    found = _SHARED.get(value)
    if found is None:
        if len(_SHARED) >= 4096:
            _SHARED.clear()
        found = _SHARED[value] = value
    return found  # type: ignore[no-any-return]


class KafkaConnection(ReplyOrder, asyncio.Protocol):
    # One per client connection, thousands at a time: no per-instance __dict__.
    __slots__ = (
        "_client_id",
        "_corked",
        "_corked_bytes",
        "_holds",
        "_max_frame",
        "_observe",
        "_queue",
        "_reader",
        "_site",
        "broker",
        "client_host",
        "closed",
        "quiet_sweeps",
        "transport",
    )

    # Who the client is, as ACLs name it. A plain connection is always ANONYMOUS: only the
    # SASL and TLS connections, whose principal can change, give it a slot of their own.
    principal: str = ANONYMOUS

    def __init__(
        self,
        broker: Broker,
        listener: str = "PLAINTEXT",
        advertised: tuple[str, int] | None = None,
    ) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        # Made with the first read that is not exactly one frame: most connections never
        # need one, and ten thousand members would each hold one for nothing.
        self._reader: FrameReader | None = None
        self._max_frame = broker.config.socket_request_max_bytes
        # Answers held back behind an unresolved parked reply, in request order. None while
        # nothing is held (the usual case), so an answer ready at once skips it entirely.
        # A list, not a deque: it rarely holds more than a few, and an empty deque alone is
        # 600 bytes, held by every connection waiting in a JoinGroup.
        self._queue: list[Answer | ParkedReply] | None = None
        # From a read to the end of its turn of the loop, answers collect here and go out in
        # one write (Broker.cork): a client that pipelines, or many members sharing a
        # connection, costs one send, not one per answer.
        self._corked: list[bytes] | None = None
        self._corked_bytes = 0
        self.closed = False
        self.client_host = ""
        # (listener, advertised address), one tuple shared by the connections of a listener:
        # the name of the listener it came in through (DescribeQuorum names it), PLAINTEXT
        # being the one listener made without `listeners`; and the address Metadata and
        # FindCoordinator name, its listener's advertised one, else (from connection_made)
        # the address the client connected to.
        self._site: tuple[str, tuple[str, int] | None] = _shared((listener, advertised))
        self._client_id: str | None = None
        self._observe: Callable[[Any], None] | None = None
        # What holds reading or dispatching back, as bits (READ_PAUSED and the rest): one
        # slot where four flags were four, in each of thousands of connections; 0 on nearly
        # every read.
        self._holds = 0
        # Idle-connection sweeps (connections.max.idle.ms) since this connection last read or
        # wrote: a small int stored per request, where a clock read would cost a call and a
        # float each time.
        self.quiet_sweeps = 0

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.client_host = _shared(f"/{peer[0]}")
        listener, advertised = self._site
        if advertised is None or not advertised[0] or not advertised[1]:
            # Nothing advertised, or advertised.listeners left the host empty or the port 0:
            # the address connected to fills the gaps, as Kafka fills them from its host name
            # and bound port.
            local = transport.get_extra_info("sockname")
            local = local[:2] if local else ("", 0)
            if advertised is not None:
                local = (advertised[0] or local[0], advertised[1] or local[1])
            self._site = _shared((listener, local))
        limit = self.broker.config.max_connections
        if len(self.broker.connections) >= limit:
            self.abort(f"max.connections={limit} reached")
            return
        self.broker.connections[self] = None

    @property
    def client_id(self) -> str | None:
        """The client id of the connection's latest request (clients keep one per connection)."""
        return self._client_id

    @property
    def listener(self) -> str:
        return self._site[0]

    @property
    def address(self) -> tuple[str, int]:
        return self._site[1] or ("", 0)

    @property
    def peer(self) -> str:
        """The client's address as log lines name it (made when needed, not per connection:
        the port, kept, would be a slot and an int object in each of thousands)."""
        if not self.client_host:
            return "unknown"
        host = self.client_host[1:]
        try:
            # uvloop keeps the socket it answers from; a closed transport has none to ask.
            port = self.transport.get_extra_info("peername")[1]  # type: ignore[union-attr]
        except Exception:
            return host
        return f"{host}:{port}"

    def eof_received(self) -> bool | None:
        # The client shut its side (SHUT_WR) and may still read. Kafka reads no end of stream
        # while a request is in hand (the channel is muted until its answer is sent), so the
        # answers still due go out: keep the connection until they have. (A TLS transport
        # cannot stay half-open and closes as before.)
        if self._queue:
            self._holds |= HALF_CLOSED
            return True
        return None

    @property
    def hung_up(self) -> bool:
        return self.closed or bool(self._holds & HALF_CLOSED)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._queue = None
        self.broker.connections.pop(self, None)
        if "shares" in self.broker.__dict__:
            # Its share sessions close: the records their members hold go back to the group.
            self.broker.shares.on_disconnect(self)
            self.broker.persist_shares()

    def data_received(self, data: bytes) -> None:
        self.quiet_sweeps = 0
        by_hand = False
        if self._corked is None:
            self._corked = []
            self._corked_bytes = 0
            # Without a loop (a connection driven by hand) no turn ends: this read's answers
            # go out once it is handled.
            by_hand = not self.broker.cork(self)
        reader = self._reader
        if (
            self._queue is None
            and not self._holds & _NOT_DIRECT
            and not self.closed
            and (reader is None or not reader.buffered)
            and (frame := whole_frame(data, self._max_frame)) is not None
        ):
            # Nearly every read: one request, nothing held back.
            self._dispatch(frame)
        else:
            if reader is None:
                reader = self._reader = FrameReader(self._max_frame)
            reader.append(data)
            self._drain_frames()
        if by_hand:
            self.uncork()

    @property
    def corked(self) -> bool:
        return self._corked is not None

    def uncork(self) -> None:
        """Write the answers held since this turn's read (Broker.cork)."""
        corked = self._corked
        self._corked = None
        if corked and not self.closed and self.transport is not None:
            if len(corked) == 1:
                self.transport.write(corked[0])  # _write's common case: one answer
            else:
                self._write(corked)

    def pause_writing(self) -> None:
        self._holds |= WRITE_PAUSED
        self._pause_reading()

    def resume_writing(self) -> None:
        self._holds &= ~WRITE_PAUSED
        self._maybe_resume()

    def _blocked(self) -> bool:
        queue = self._queue
        return bool(self._holds & WRITE_PAUSED) or (
            queue is not None and len(queue) >= self.broker.config.queued_max_requests
        )

    def _drain_frames(self) -> None:
        """Dispatch buffered frames until none is whole or back-pressure says stop."""
        if self._holds & DRAINING:
            return
        self._holds |= DRAINING
        try:
            while not self.closed:
                queue = self._queue
                # _blocked(), read inline: it is asked before every frame.
                if self._holds & WRITE_PAUSED or (
                    queue is not None and len(queue) >= self.broker.config.queued_max_requests
                ):
                    self._pause_reading()
                    return
                reader = self._reader
                if reader is None:
                    return
                try:
                    frame = reader.next_frame()
                except (FrameTooLarge, NegativeFrameSize) as exc:
                    self.abort(str(exc))
                    return
                if frame is None:
                    return
                self._dispatch(frame)
        finally:
            self._holds &= ~DRAINING

    def _pause_reading(self) -> None:
        if not self._holds & READ_PAUSED and self.transport is not None and not self.closed:
            self._holds |= READ_PAUSED
            self.transport.pause_reading()

    def _maybe_resume(self) -> None:
        if self._holds & READ_PAUSED and not self._blocked() and not self.closed:
            self._holds &= ~READ_PAUSED
            assert self.transport is not None
            self.transport.resume_reading()
            # Frames already buffered would otherwise wait for the next read.
            asyncio.get_running_loop().call_soon(self._drain_frames)

    @property
    def reading_paused(self) -> bool:
        """Back-pressure has stopped reading from the client."""
        return bool(self._holds & READ_PAUSED)

    @property
    def buffered(self) -> int:
        """Bytes read but not yet taken as frames (a half-sent request, a paused burst)."""
        return 0 if self._reader is None else self._reader.buffered

    def set_frame_limit(self, max_size: int) -> None:
        """The largest request frame accepted from now on."""
        self._max_frame = max_size
        if self._reader is not None:
            self._reader.max_size = max_size

    @property
    def idle(self) -> bool:
        """No answer pending: only then may a quiet connection be closed as idle."""
        return not self._queue

    @property
    def mid_request(self) -> bool:
        """Part of a request has arrived, and not the rest."""
        return self._reader is not None and self._reader.buffered > 0

    # -- requests -------------------------------------------------------------------------

    def _dispatch(self, frame: bytes) -> None:
        try:
            header, pos = parse_request_header(frame)
        except MalformedHeader as exc:
            self.abort(f"malformed request header: {exc}")
            return
        client_id = header.client_id
        if client_id != self._client_id:  # _note_client_id, inlined: every request passes
            self._client_id = sys.intern(client_id) if client_id else client_id
        handlers = self.broker.handlers
        handler = handlers.loaded.get(header.api_key) or handlers.get(header.api_key)
        if handler is None:
            self._unserved(header)
            return
        spec = handler.spec
        version = header.api_version
        # Handler.supports and ApiSpec.request_flexible, read inline: every request asks.
        if not handler.min_version <= version <= handler.max_version:
            self._unsupported_version(handler, header)
            return
        try:
            if version >= spec.request_flexible_from:
                # No tagged fields (one zero byte) is what clients send.
                pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
            if handler.decode is not None:
                request = handler.decode(frame[pos:], version)
            else:
                request = decode_whole(spec.request, memoryview(frame)[pos:], version)
        except Exception as exc:
            # The SASL and SCRAM APIs carry secrets: their bytes never go into a log line.
            detail = "" if spec.key in _SECRET_APIS else f": {exc!r}"
            self.abort(f"undecodable {spec.name} v{version} request{detail}")
            return
        violation = None if handler.decode is not None else null_violation(request, version)
        if violation is not None:
            self.abort(f"invalid {spec.name} v{version} request: non-nullable {violation} is null")
            return
        broker = self.broker
        observe = None
        # The request log's cost when DEBUG is off: this one attribute read.
        if broker.metrics is not None or broker.request_log is not None:
            observe = request_log.observer(broker, self, header, spec, request)
        # Replies parked by the handler carry the hook from birth: they may be resolved
        # before the handler even returns.
        self._observe = observe
        try:
            out = None
            delay = 0
            cut = None
            faults = broker.faults
            # None until a Controller exists. The lists are read here rather than through
            # Faults.__bool__: a Python-level call on every request for nearly always nothing.
            if faults is not None and (
                faults.fail_rules or faults.latency_rules or faults.cut_rules
            ):
                from minicoord.server.fault_answers import injected_answer

                cut = faults.cut(spec.key)
                if cut is not None and not cut.after_handling:
                    self.abort(f"injected fault: cut before handling {spec.name}")
                    return
                out, delay = injected_answer(self, spec, header, request)
            if out is None:
                out = handler.handle(RequestContext(broker, self, header, spec), request)
            if cut is not None:
                self.abort(f"injected fault: cut after handling {spec.name}")
                return
            if out is NO_RESPONSE:
                if broker.request_log is not None:
                    broker.request_log.answered(self.peer, header, spec, request, None, 0.0)
                return
            if delay:
                from minicoord.server.fault_answers import delayed_answer

                out = delayed_answer(self, header, spec, out, delay)
            if isinstance(out, ParkedReply):
                slot: Answer | ParkedReply = out
            else:
                if observe is not None:
                    observe(out)
                slot = encode_response(version, header.correlation_id, spec, out)
        except OSError as exc:
            if not broker.logs.in_memory:
                # The data directory failed under a request (full, gone, out of file
                # descriptors while making a log): as Kafka takes its only log directory
                # offline and halts, rather than answer from state the disk does not hold.
                log.exception("the data directory failed under %s v%d", spec.name, version)
                halt(f"cannot use the data directory handling {spec.name}: {exc!r}")
            self._internal_error(spec.name, version, header)
            return
        except Exception:
            self._internal_error(spec.name, version, header)
            return
        if self._queue is None and type(slot) is bytes:
            # _enqueue's common case, read here: nothing held back and the answer ready.
            self._emit(slot)
        else:
            self._enqueue(slot)

    def _internal_error(self, name: str, version: int, header: RequestHeader) -> None:
        # Called inside the handler's `except`: the log line carries its traceback.
        log.exception(
            "error handling %s v%d from %s (client id %r)",
            name,
            version,
            self.peer,
            header.client_id,
        )
        self.abort(f"internal error handling {name} v{version}")

    def _unsupported_version(self, handler: Handler, header: RequestHeader) -> None:
        request_log.unsupported_version(self.broker, self.peer, header, handler)
        if handler.spec.key != API_VERSIONS_KEY:  # ApiVersions is answered at v0 below
            # Kafka's SocketServer closes a connection whose request is at a version it does
            # not enable (parseRequestHeader): an answer in another version's layout, as
            # this was, left old clients waiting on bytes they could not read.
            version = f"v{header.api_version} of {handler.spec.name}"
            self.abort(f"unsupported {version}", logged=False)
            return
        header, response = api_versions_fallback(header, self.broker.handlers)
        if self.broker.request_log is not None:
            self.broker.request_log.answered(self.peer, header, handler.spec, None, response, 0.0)
        self._enqueue(
            encode_response(header.api_version, header.correlation_id, handler.spec, response)
        )

    def _unserved(self, header: RequestHeader) -> None:
        """An API we do not serve: closed, as Kafka closes on an API key it does not know."""
        request_log.unserved(self.broker, self.peer, header)
        self.abort(f"unknown API key {header.api_key}", logged=False)

    def _note_client_id(self, client_id: str | None) -> None:
        if client_id != self._client_id:
            # Interned: the coordinator's member records of this client share the one copy.
            self._client_id = sys.intern(client_id) if client_id else client_id

    def abort(self, reason: str, logged: bool = True, level: int = logging.WARNING) -> None:
        """Close the connection; `logged=False` when the caller has already said why."""
        if self.closed:
            return
        if logged:
            log.log(
                level,
                "closing connection from %s (client id %r): %s",
                self.peer,
                self._client_id,
                reason,
            )
        self.closed = True
        self._queue = None
        if self.transport is not None:
            corked = self._corked
            if corked:
                # Answers already given in this read still go out before the close.
                self.transport.writelines(list(corked))
                corked.clear()
            self.transport.close()
