"""The listener: a Broker served on a TCP socket by an asyncio server, with its background work."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from minicoord.server import early_listen, request_log
from minicoord.server.background import BackgroundWork
from minicoord.server.broker import Broker, halt
from minicoord.server.config import Config
from minicoord.server.connection import KafkaConnection
from minicoord.server.loading import load_logs, plan_loading
from minicoord.server.storage_thread import StorageThread
from minicoord.server.topics import Topic, initial_topic_error
from minicoord.storage.log import FlushPolicy, LogManager

if TYPE_CHECKING:
    from pathlib import Path

    from minicoord.server.faults import Controller
    from minicoord.server.metrics import Metrics
    from minicoord.server.security.acls import Acl

log = logging.getLogger("minicoord.server")


def _parse_acls(given: Iterable[str | Acl]) -> list[Acl]:
    specs = list(given)
    if not specs:
        return []  # without importing the ACL modules, which most servers never use
    from minicoord.server.security.specs import parse_acl

    return [parse_acl(a) for a in specs]


def arrival_address(sockets: Sequence[Any]) -> tuple[str, int] | None:
    """The local address every connection accepted on these listening sockets has, if they
    share one: a single socket bound to one address, not a wildcard (0.0.0.0, ::)."""
    if len(sockets) != 1:
        return None
    host, port = sockets[0].getsockname()[:2]
    packed = early_listen.packed_ip(host)
    if packed is None or not any(packed):
        return None
    return host, port


class Server(BackgroundWork):
    def __init__(
        self,
        config: Config | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        topics: Iterable[tuple[str, int]] = (),
        data_dir: Path | str | None = None,
        metrics_port: int | None = None,
        control_port: int | None = None,
        admin_host: str = "127.0.0.1",
        acls: Iterable[str | Acl] = (),
        users: Iterable[tuple[str, str]] = (),
        sockets: list[socket.socket] | None = None,
    ) -> None:
        """A server; `data_dir=None` keeps everything (topics, groups, offsets) in memory.

        `metrics_port` serves Prometheus metrics at /metrics, `control_port` the control API
        of `minicoord ctl`; both off unless given (0 picks a free port). The `listeners`
        config, when set, replaces host and port; `users` are (name, password) pairs that
        may authenticate with PLAIN and SCRAM on SASL listeners.
        """
        from minicoord.server.security.listeners import listeners_of

        for what, number in (
            ("port", port),
            ("metrics_port", metrics_port),
            ("control_port", control_port),
        ):
            # Checked here: the loop's bind would take 70000 as 4464 (a 16-bit field).
            if number is not None and not 0 <= number <= 65535:
                raise ValueError(f"{what} {number} is not a port (0-65535)")
        self.config = config or Config()
        self.listeners = listeners_of(self.config, host, port)
        first = self.listeners[0]
        self.host = first.host or "0.0.0.0"
        self.port = first.port
        # Each listener's bound (host, port), in the order of `listeners`.
        self.bound: list[tuple[str, int]] = []
        self._users = list(users)
        if data_dir is not None:
            from pathlib import Path  # here: an in-memory server does without pathlib

            data_dir = Path(data_dir)
        self.logs = LogManager(
            data_dir,
            FlushPolicy(self.config.log_flush_policy),
        )
        self.broker = Broker(self.config, logs=self.logs)
        self._control: Controller | None = None
        self.metrics: Metrics | None = None
        if metrics_port is not None:
            # Imported here: prometheus_client is a good share of the start-up time and memory
            # of a server, and one without --metrics-port does without it.
            from minicoord.server.metrics import Metrics

            self.metrics = self.broker.metrics = Metrics(self.broker)
        self.metrics_port = metrics_port
        self.control_port = control_port
        self.admin_host = admin_host
        self._admin: list[asyncio.base_events.Server] = []
        self._initial_topics = list(topics)
        for name, partitions in self._initial_topics:
            reason = initial_topic_error(name, partitions)
            if reason is not None:
                raise ValueError(f"topic {name}: {reason}")
        # Parsed now, so that a bad spec fails before anything listens (InvalidAcl).
        self._initial_acls = _parse_acls(acls)
        # asyncio Servers, and TlsServers for TLS listeners.
        self._servers: list[Any] = []
        # Bound already, one per listener (server/early_listen.py): served, not bound again.
        self._sockets = sockets
        self._tasks: list[asyncio.Task[None]] = []
        # Loading and cleaning read and write files in this thread, off the event loop.
        self._storage = StorageThread()
        self.loaded = asyncio.Event()

    @property
    def control(self) -> Controller:
        """The operator's handle (faults.py), made on first use: a server nobody controls
        loads none of it."""
        if self._control is None:
            from minicoord.server.faults import Controller

            self._control = Controller(self.broker)
        return self._control

    @property
    def bootstrap(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def address_of(self, listener: str) -> str:
        """HOST:PORT bound for the named listener (KeyError if there is none)."""
        for lst, (host, port) in zip(self.listeners, self.bound, strict=True):
            if lst.name == listener.upper():
                return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise KeyError(listener)

    def describe_listeners(self) -> str:
        from minicoord.server.security.listeners import describe

        return describe(self.listeners, self.bound)

    def _factory(
        self, listener: Any, arrival: list[tuple[str, int] | None]
    ) -> tuple[Callable[[], asyncio.Protocol], Any]:
        """The protocol factory and SSLContext (or None) of one listener.

        `arrival[0]` is set once the listener is bound, when all its connections arrive at one
        address: without an advertised address, that is what Metadata names, and a connection
        given it never asks its transport (which keeps the answer for the connection's life).
        """
        broker = self.broker
        ssl_context = None
        if listener.tls:
            from minicoord.server.security.tls import server_context

            ssl_context = server_context(self.config, listener)
        # A listener left out of advertised.listeners advertises the address its clients
        # connected to, never another listener's (which may speak another protocol). Kafka
        # lists no broker for such a listener at all, which leaves its clients nowhere to go.
        advertised = listener.advertised
        make: Callable[[str, tuple[str, int] | None], KafkaConnection]
        if listener.sasl:
            from minicoord.server.security.connections import SaslConnection
            from minicoord.server.security.sasl import settings_for

            settings = settings_for(self.config, listener, broker.user_store())

            def make(name: str, address: tuple[str, int] | None) -> KafkaConnection:
                return SaslConnection(broker, settings, name, address)

        elif listener.tls:
            from minicoord.server.security.connections import TlsConnection

            make = partial(TlsConnection, broker)
        else:
            make = partial(KafkaConnection, broker)

        def factory() -> asyncio.Protocol:
            return make(listener.name, advertised or arrival[0])

        return factory, ssl_context

    async def start(self) -> None:
        request_log.refresh(self.broker)
        self.logs.lock()
        try:
            await self._start_locked()
        except BaseException:
            # Nothing is served: give back what was taken (a port of this process, or its
            # data directory's lock, would stay taken until the process exits). stop() closes
            # whatever part of the start was done.
            try:
                await self.stop(grace_s=0)
            except Exception:
                # The start's own failure is the one to raise; this one is only logged.
                log.exception("stopping after a failed start")
                self.logs.release_lock()
            raise

    async def _start_locked(self) -> None:
        loop = asyncio.get_running_loop()
        broker = self.broker
        broker.cluster_id = self.logs.cluster_id(broker.cluster_id, self.config.broker_id)
        broker.open_metadata()
        broker.compact_metadata()
        broker.add_acls(self._initial_acls)
        for name, partitions in self._initial_topics:
            existing = broker.topics.get(name)
            colliding = broker.topics.colliding(name)
            if existing is None and colliding is not None:
                log.warning("--topic %s collides with the topic %s; not created", name, colliding)
            elif existing is None:
                broker.create_topic(name, partitions)
            elif existing.partitions != partitions:
                log.warning(
                    "--topic %s:%d: the topic already has %d partitions; kept as it is",
                    name,
                    partitions,
                    existing.partitions,
                )
        offsets_partitions, topic_partitions = plan_loading(broker)
        if self._users or any(lst.sasl for lst in self.listeners):
            broker.add_users(self._users)
        arrivals: list[list[tuple[str, int] | None]] = [[None] for _ in self.listeners]
        factories = [
            self._factory(lst, arrival)
            for lst, arrival in zip(self.listeners, arrivals, strict=True)
        ]
        broker.attach(loop)
        for i, (lst, (factory, ssl_context)) in enumerate(
            zip(self.listeners, factories, strict=True)
        ):
            server: Any
            if ssl_context is not None:
                from minicoord.server.security.tls import TlsServer, listening_socket

                sock = (
                    self._sockets[i]
                    if self._sockets is not None
                    else listening_socket(lst.host, lst.port)
                )
                server = TlsServer(sock, factory, ssl_context)
            elif self._sockets is not None:
                server = await loop.create_server(factory, sock=self._sockets[i], backlog=1024)
            elif early_listen.packed_ip(lst.host) is not None:
                (sock,) = early_listen.bind([lst])
                server = await loop.create_server(factory, sock=sock, backlog=1024)
            else:
                server = await loop.create_server(
                    factory, lst.host or None, lst.port, reuse_address=True, backlog=1024
                )
            self._servers.append(server)
            arrivals[i][0] = arrival_address(server.sockets)
            # With port 0 the OS picked one: report what we actually bound.
            host, port = server.sockets[0].getsockname()[:2]
            self.bound.append((lst.host or host, port))
        self.host, self.port = self.bound[0]
        if self.metrics is not None and self.metrics_port is not None:
            from minicoord.server.admin_http import metrics_routes, start_http

            http = await start_http(
                metrics_routes(self.metrics), self.admin_host, self.metrics_port
            )
            self._admin.append(http)
            self.metrics_port = http.sockets[0].getsockname()[1]
        if self.control_port is not None:
            # The HTTP endpoint loads only for a server that has one.
            from minicoord.server.admin_http import control_routes, start_http

            http = await start_http(
                control_routes(self.control), self.admin_host, self.control_port
            )
            self._admin.append(http)
            self.control_port = http.sockets[0].getsockname()[1]
        self._tasks.append(loop.create_task(self._close_idle_periodically()))
        self._tasks.append(loop.create_task(self._load(offsets_partitions, topic_partitions)))
        self._tasks.append(loop.create_task(self._clean_periodically()))
        if self.logs.policy is FlushPolicy.NONE and not self.logs.in_memory:
            self._tasks.append(loop.create_task(self._write_buffered_periodically()))

    async def _load(
        self, offsets_partitions: list[int], topic_partitions: list[tuple[Topic, int]]
    ) -> None:
        await load_logs(self.broker, offsets_partitions, topic_partitions, self._storage)
        self.loaded.set()

    async def stop(self, grace_s: float = 5.0) -> None:
        """A clean shutdown, bounded by about `grace_s`.

        Stop accepting; let requests whose records are being written get their answers;
        close every connection once what it has been answered is sent; flush and close the
        log. Replies still waiting on other members (a JoinGroup, a long poll) are not
        answered: those clients see the connection close and retry, as with a Kafka broker.
        """
        for http in self._admin:
            http.close()
        self._admin = []
        if self._servers:
            for server in self._servers:
                server.close()
            if not await self.broker.drain(grace_s):
                log.warning("shutting down with writes still in progress after %.0f s", grace_s)
            # Answers of the turn this stop began in may still be corked.
            self.broker.uncork()
            for conn in list(self.broker.connections):
                if conn.transport is not None:
                    conn.transport.close()  # sends what is buffered, then closes
            deadline = time.monotonic() + grace_s
            while self.broker.connections and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            for conn in list(self.broker.connections):
                if conn.transport is not None:
                    conn.transport.abort()
            for server in self._servers:
                await server.wait_closed()
            self._servers = []
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        # A cleaning or loading step in its thread cannot be interrupted: let it finish
        # before the store closes under it.
        self._storage.shutdown()
        self.broker.close()
        request_log.forget(self.broker)
        from minicoord.server import log_levels

        log_levels.restore(self.broker)

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve(server: Server, announced: bool = False) -> None:
    """Run until SIGTERM or SIGINT, printing the ready line once listening (unless
    `announced`: the caller bound the sockets and printed it)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before the ready line: a script may send SIGTERM as soon as it has read it.
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if early_listen.stop_requested:
        stop.set()
    await server.start()
    if server.metrics_port is not None:
        log.info("metrics on http://%s:%d/metrics", server.admin_host, server.metrics_port)
    if server.control_port is not None:
        log.info("control API on %s:%d", server.admin_host, server.control_port)
    if not announced:
        print(f"minicoord listening on {server.describe_listeners()}", flush=True)
    await stop.wait()
    log.info("shutting down")
    try:
        await server.stop()
    except OSError as exc:
        # The last write of what `none` buffered (or of a checkpoint) failed: acknowledged
        # records are not on disk, as when the periodic writer fails. Said as loudly, with the
        # same status; a host embedding the Server sees the exception from `stop` instead.
        halt(f"cannot write a log at shutdown: {exc}")
