"""A bare uvloop server that answers every Kafka request frame with a HeartbeatResponse.

It is the ceiling against which the heartbeat benchmark measures minicoord: the same event
loop, the same framing, no decoding, no coordinator. Whatever a request is, the answer is a
HeartbeatResponse frame of the request's version carrying its correlation id and error 0, so a
simulated member heartbeating against it sees a valid reply. Run:

    python -m minicoord.bench.echo_server --port 0

It prints `echo listening on HOST:PORT` when ready, like `minicoord serve`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Sequence

from minicoord.server.process import ServerProcess

READY_PREFIX = "echo listening on "
_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_SIZE = struct.Struct(">i")


def heartbeat_response(correlation_id: int, version: int) -> bytes:
    """A framed HeartbeatResponse of `version` (v4: flexible header and body), error 0."""
    cid = struct.pack(">i", correlation_id)
    if version >= 4:
        body = cid + b"\x00" + b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x00"
    elif version >= 1:
        body = cid + b"\x00\x00\x00\x00" + b"\x00\x00"
    else:
        body = cid + b"\x00\x00"
    return _SIZE.pack(len(body)) + body


class EchoProtocol(asyncio.Protocol):
    __slots__ = ("_buf", "_transport")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        out = []
        pos = 0
        end = len(buf)
        while end - pos >= 12:
            size, _key, version, cid = _HEAD.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            out.append(heartbeat_response(cid, version))
            pos += 4 + size
        if pos:
            del buf[:pos]
        if out and self._transport is not None:
            # One write per read, like minicoord's connection: same syscall pattern.
            self._transport.write(b"".join(out))


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    server = await loop.create_server(EchoProtocol, host, port, reuse_address=True, backlog=1024)
    bound = server.sockets[0].getsockname()
    print(f"{READY_PREFIX}{bound[0]}:{bound[1]}", flush=True)
    await stop.wait()
    server.close()


def start_echo_process(timeout: float = 15) -> ServerProcess:
    """Start the echo server as its own process on a free loopback port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "minicoord.bench.echo_server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(READY_PREFIX):
        proc.kill()
        proc.wait(5)
        raise RuntimeError(f"echo server did not start: {line!r}")
    port = int(line[len(READY_PREFIX) :].strip().rsplit(":", 1)[1])
    return ServerProcess(proc, "127.0.0.1", port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.host, args.port))
    else:
        uvloop.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
