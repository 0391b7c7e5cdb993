"""A lean asyncio Kafka protocol connection: futures keyed by correlation id, one reader task.

Requests are kafka-python's generated message objects; the response class and header version
come from the same registry the server uses. It also exposes raw frame I/O, so tests can send
bytes no well-behaved client would.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from typing import Any

from minicoord.protocol.apis import SPECS, ApiSpec
from minicoord.protocol.headers import skip_tagged_fields

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
API_VERSIONS_KEY = 18


class ConnectionClosed(ConnectionError):
    pass


class ProtocolClient:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future[Any], ApiSpec | None, int]] = {}
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        self.closed = asyncio.Event()

    @classmethod
    async def connect(
        cls, host: str, port: int, client_id: str = "minicoord-client"
    ) -> ProtocolClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, client_id)

    async def request(self, request: Any, version: int | None = None) -> Any:
        """Send a request object and await its decoded response."""
        if version is None:
            version = request.API_VERSION
        spec = SPECS[request.API_KEY]
        correlation_id = next(self._correlation)
        request.API_VERSION = version
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        data = request.encode(header=True, framed=True)
        return await self._send(correlation_id, bytes(data), spec, version)

    async def request_raw(self, payload: bytes, correlation_id: int) -> bytes:
        """Send an unframed request body (header included); await the raw response body."""
        return await self._send(correlation_id, _SIZE.pack(len(payload)) + payload, None, 0)

    def send_bytes(self, data: bytes) -> None:
        """Write arbitrary bytes, framing and all, with no response expected."""
        self._writer.write(data)

    async def _send(
        self, correlation_id: int, data: bytes, spec: ApiSpec | None, version: int
    ) -> Any:
        if self.closed.is_set():
            raise ConnectionClosed("connection is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, spec, version)
        self._writer.write(data)
        return await future

    async def _read_loop(self) -> None:
        error: BaseException = ConnectionClosed("connection closed by the server")
        try:
            while True:
                head = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                body = await self._reader.readexactly(size)
                (correlation_id,) = _CORRELATION.unpack_from(body, 0)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    continue
                future, spec, version = entry
                if future.done():
                    continue
                if spec is None:
                    future.set_result(body)
                    continue
                try:
                    future.set_result(_decode(spec, version, body))
                except Exception as exc:
                    future.set_exception(exc)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            error = ConnectionClosed(f"connection closed: {exc!r}")
        except asyncio.CancelledError:
            error = ConnectionClosed("client closed")
            raise
        finally:
            self.closed.set()
            for future, _, _ in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    async def close(self) -> None:
        self._writer.close()
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
            await self._read_task
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> ProtocolClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _decode(spec: ApiSpec, version: int, body: bytes) -> Any:
    pos = 4
    # ApiVersions responses always use header v0; others v1 when flexible.
    if spec.key != API_VERSIONS_KEY and spec.response_flexible(version):
        pos = skip_tagged_fields(body, pos)
    if spec.key == API_VERSIONS_KEY:
        # An UNSUPPORTED_VERSION answer comes at v0 whatever was asked (KIP-511).
        (error,) = struct.unpack_from(">h", body, pos)
        if error != 0:
            version = 0
    return spec.response.decode(memoryview(body)[pos:], version=version)
