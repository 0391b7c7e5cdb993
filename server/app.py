"""The listener: a Broker served on a TCP socket by an asyncio server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterable

from minicoord.server.broker import Broker
from minicoord.server.config import Config
from minicoord.server.connection import KafkaConnection

log = logging.getLogger("minicoord.server")


class Server:
    def __init__(
        self,
        config: Config | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        topics: Iterable[tuple[str, int]] = (),
    ) -> None:
        self.config = config or Config()
        self.host = host
        self.port = port
        self.broker = Broker(self.config)
        for name, partitions in topics:
            self.broker.topics.create(name, partitions)
        self._server: asyncio.base_events.Server | None = None

    @property
    def bootstrap(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.broker.attach(loop)
        self._server = await loop.create_server(
            lambda: KafkaConnection(self.broker),
            self.host,
            self.port,
            reuse_address=True,
            backlog=1024,
        )
        # With port 0 the OS picked one: report what we actually bound.
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.broker.connections):
                if conn.transport is not None:
                    conn.transport.close()
            await self._server.wait_closed()
            self._server = None
        self.broker.close()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve(server: Server) -> None:
    """Run until SIGTERM or SIGINT, printing the ready line once listening."""
    await server.start()
    print(f"minicoord listening on {server.bootstrap}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await server.stop()
