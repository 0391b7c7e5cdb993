"""A minicoord server on a background event-loop thread of this process.

The server starts in milliseconds (no interpreter to boot) and is reachable through
`bootstrap` like any broker. Its controller (fault injection) is exposed through a proxy whose
calls run on the server's loop thread and return their result, so tests on any thread can use
it safely.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from minicoord.server.app import Server
from minicoord.server.config import Config, with_authorizer
from minicoord.server.security.acls import Acl
from minicoord.testing.security import (
    ClientSettings,
    TlsFiles,
    _tls_files,
    client_settings,
    security_configs,
)

T = TypeVar("T")


class _ControlProxy:
    """Controller methods, each run on the server's loop thread."""

    def __init__(self, embedded: EmbeddedServer) -> None:
        self._embedded = embedded

    def __getattr__(self, name: str) -> Callable[..., Any]:
        from minicoord.server.faults import Controller

        method = getattr(Controller, name)
        if name.startswith("_") or not callable(method):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._embedded.call(
                lambda: method(self._embedded.server.control, *args, **kwargs)
            )

        return call


class EmbeddedServer:
    def __init__(
        self,
        configs: Mapping[str, object] | None = None,
        topics: Iterable[tuple[str, int] | str] = (),
        data_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        metrics_port: int | None = None,
        control_port: int | None = None,
        acls: Iterable[str | Acl] = (),
        super_users: Iterable[str] = (),
        listeners: str | None = None,
        users: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        tls: TlsFiles | str | Path | None = None,
        ssl_client_auth: str | None = None,
    ) -> None:
        settings = {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (configs or {}).items()
        }
        # Certificates made here live in a temporary directory that goes with this object.
        self.tls, self._made_certs = _tls_files(tls, settings, listeners)
        settings = security_configs(settings, listeners, self.tls, ssl_client_auth)
        self.users = dict(users.items() if isinstance(users, Mapping) else users or ())
        self._acls = list(acls)
        self.config = Config.from_pairs(
            with_authorizer(list(settings.items()), self._acls, super_users)
        )
        self._topics = [_topic(t) for t in topics]
        self._data_dir = data_dir
        self._host = host
        self._port = port
        self._admin_ports = (metrics_port, control_port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.server: Server
        self.control = _ControlProxy(self)

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    @property
    def port(self) -> int:
        return self.server.port

    def address_of(self, listener: str) -> str:
        """HOST:PORT of the named listener (e.g. "SASL_SSL")."""
        return self.server.address_of(listener)

    def client(
        self,
        listener: str | None = None,
        user: str | None = None,
        mechanism: str | None = None,
        client_cert: bool = False,
    ) -> ClientSettings:
        """What a client needs to connect through a listener (the first one by default):
        bootstrap, security.protocol, SASL mechanism and credentials, CA and client cert."""
        return client_settings(self, listener, user, mechanism, client_cert)

    def start(self, timeout: float = 10) -> EmbeddedServer:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        booting: list[asyncio.Task[None]] = []

        async def boot() -> None:
            await self.server.start()  # a failed start gives back what it took
            try:
                # Clients would wait out COORDINATOR_LOAD_IN_PROGRESS, but the Python API
                # reads state directly: a test that restarts on a data dir and looks at its
                # groups must find them there. (In memory, nothing to load.)
                await self.server.loaded.wait()
            except BaseException:
                await self.server.stop()  # abandoned while loading (the start timed out)
                raise

        def run() -> None:
            loop = _new_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self.server = Server(
                    self.config,
                    self._host,
                    self._port,
                    self._topics,
                    data_dir=self._data_dir,
                    metrics_port=self._admin_ports[0],
                    control_port=self._admin_ports[1],
                    acls=self._acls,
                    users=list(self.users.items()),
                )
                booting.append(loop.create_task(boot()))
                loop.run_until_complete(booting[0])
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                loop.close()
                return
            ready.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="minicoord-server", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout)
        except concurrent.futures.TimeoutError:
            # Not left running behind the caller's back, holding its port and data dir.
            if self._loop is not None:
                self._loop.call_soon_threadsafe(lambda: [task.cancel() for task in booting])
            self._thread.join(15)
            raise TimeoutError(
                f"minicoord did not start within {timeout} s (a data dir still loading?); stopped"
            ) from None
        return self

    def call(self, fn: Callable[[], T], timeout: float = 10) -> T:
        """Run fn on the server's loop thread and return its result."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the server is not running: start() it (or use running()) first")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout)

    def stop(self, timeout: float = 15) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _topic(topic: tuple[str, int] | str) -> tuple[str, int]:
    """A topic as (name, partitions), or "NAME:PARTITIONS" as `--topic` takes it."""
    from minicoord.server.topics import parse_topic_spec

    if isinstance(topic, str):
        return parse_topic_spec(topic)
    try:
        name, partitions = topic
    except (TypeError, ValueError):
        name, partitions = None, None
    if not isinstance(name, str) or type(partitions) is not int:
        raise ValueError(f"a topic is (NAME, PARTITIONS) or 'NAME:PARTITIONS', not {topic!r}")
    return parse_topic_spec(f"{name}:{partitions}")


@contextlib.contextmanager
def running(
    configs: Mapping[str, object] | None = None,
    topics: Iterable[tuple[str, int] | str] = (),
    data_dir: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    metrics_port: int | None = None,
    control_port: int | None = None,
    acls: Iterable[str | Acl] = (),
    super_users: Iterable[str] = (),
    listeners: str | None = None,
    users: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    tls: TlsFiles | str | Path | None = None,
    ssl_client_auth: str | None = None,
    start_timeout: float = 10,
) -> Iterator[EmbeddedServer]:
    """A server for the duration of the block; in memory unless data_dir is given. It is
    ready (its logs loaded) within `start_timeout` seconds, or stopped and TimeoutError.

    `acls` (specs such as "deny User:* Read group:blocked", see server/security/specs.py)
    and `super_users` (["User:admin"]) switch the authorizer on, as configuring
    authorizer.class.name does; with a data_dir the ACLs are kept across restarts.

    `metrics_port` / `control_port` (0 picks one) turn on the Prometheus and control HTTP
    endpoints; their bound ports are then `server.server.metrics_port` / `.control_port`.

    Security: `listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"` (Kafka's syntax),
    `users={"alice": "secret"}` (PLAIN and SCRAM), `tls=` a directory of `minicoord certs`
    (made in a temporary directory when a TLS listener needs one and none is given) and
    `ssl_client_auth` none/requested/required. `server.client("SASL_SSL", "alice",
    "SCRAM-SHA-512")` gives the client settings.
    """
    server = EmbeddedServer(
        configs,
        topics,
        data_dir,
        host,
        port,
        metrics_port,
        control_port,
        acls,
        super_users,
        listeners,
        users,
        tls,
        ssl_client_auth,
    )
    server.start(start_timeout)
    try:
        yield server
    finally:
        server.stop()
