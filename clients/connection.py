"""A lean asyncio Kafka protocol connection: futures keyed by correlation id, one reader.

Requests are kafka-python's generated message objects; the response class and header version
come from the same registry the server uses. It also exposes raw frame I/O, so tests can send
bytes no well-behaved client would.

Every request goes through a `PreparedRequest`: the framed bytes split around the correlation
id. A load generator that sends the same request many times (a member's Heartbeat) prepares it
once and pays only for splicing in a fresh correlation id, not for kafka-python's encoder.

The reader is an asyncio Protocol rather than a task reading a StreamReader: one
`data_received` cuts every whole frame out of what arrived and completes its future, with no
await per frame. Writes made in one turn of the event loop go out in one send: a load
generator multiplexing a hundred members on a connection pays one syscall per turn, not one
per request (the per-request syscall was most of its CPU time).
"""

from __future__ import annotations

import asyncio
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


# Frame layout up to the correlation id: int32 size, int16 api key, int16 api version. The
# request header v1 and v2 both start this way, so the id always sits at bytes 8..12.
_CORRELATION_AT = 8


class PreparedRequest:
    """An encoded request that can be sent many times, each with its own correlation id."""

    __slots__ = ("head", "spec", "tail", "version")

    def __init__(self, head: bytes, tail: bytes, spec: ApiSpec, version: int) -> None:
        self.head = head
        self.tail = tail
        self.spec = spec
        self.version = version


def parse_address(text: str, default_host: str | None = None) -> tuple[str, int]:
    """HOST:PORT (a bracketed IPv6 host too) with a port of 1-65535; ValueError says why not.
    An empty HOST is `default_host`, when one is given."""
    host, sep, port = text.rpartition(":")
    host = host.strip().removeprefix("[").removesuffix("]") or (default_host or "")
    if not sep or not host:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"expected HOST:PORT with a numeric port, got {text!r}") from None
    if not 1 <= number <= 65535:
        raise ValueError(f"the port must be 1-65535, got {text!r}")
    return host, number


class ProtocolClient(asyncio.Protocol):
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future[Any], ApiSpec | None, int]] = {}
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._out: list[bytes] = []
        self._loop = asyncio.get_running_loop()
        self.closed = asyncio.Event()
        self.host = ""
        self.port = 0

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        client_id: str = "minicoord-client",
        ssl: Any = None,
    ) -> ProtocolClient:
        """A connection; `ssl` an ssl.SSLContext for an SSL or SASL_SSL listener."""
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(
            lambda: cls(client_id), host, port, ssl=ssl, server_hostname=host if ssl else None
        )
        client.host, client.port = host, port
        return client

    def prepare(self, request: Any, version: int | None = None) -> PreparedRequest:
        """Encode a request object once, for `request_prepared` (any number of times)."""
        if version is None:
            version = request.API_VERSION
        request.API_VERSION = version
        request.with_header(correlation_id=0, client_id=self.client_id)
        data = bytes(request.encode(header=True, framed=True))
        return PreparedRequest(
            data[:_CORRELATION_AT],
            data[_CORRELATION_AT + 4 :],
            SPECS[request.API_KEY],
            version,
        )

    async def request(self, request: Any, version: int | None = None) -> Any:
        """Send a request object and await its decoded response."""
        return await self.request_prepared(self.prepare(request, version))

    async def request_prepared(self, prepared: PreparedRequest) -> Any:
        """Send a prepared request under a new correlation id; await its decoded response."""
        correlation_id = next(self._correlation)
        data = prepared.head + _CORRELATION.pack(correlation_id) + prepared.tail
        return await self._send(correlation_id, data, prepared.spec, prepared.version)

    async def request_raw(self, payload: bytes, correlation_id: int) -> bytes:
        """Send an unframed request body (header included); await the raw response body."""
        return await self._send(correlation_id, _SIZE.pack(len(payload)) + payload, None, 0)

    def send_bytes(self, data: bytes) -> None:
        """Write arbitrary bytes, framing and all, with no response expected."""
        self._write(data)

    def _send(
        self, correlation_id: int, data: bytes, spec: ApiSpec | None, version: int
    ) -> asyncio.Future[Any]:
        if self.closed.is_set():
            raise ConnectionClosed("connection is closed")
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[correlation_id] = (future, spec, version)
        self._write(data)
        return future

    def _write(self, data: bytes) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self.closed.is_set():
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        pending = self._pending
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            body = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            (correlation_id,) = _CORRELATION.unpack_from(body, 0)
            entry = pending.pop(correlation_id, None)
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
        if pos:
            del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionClosed(f"connection closed: {exc!r}" if exc else "connection closed"))

    def _fail(self, error: BaseException) -> None:
        self.closed.set()
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        self._fail(ConnectionClosed("client closed"))

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
