"""Lean request load without Spark: pre-encoded frames sent back to back over raw sockets.

Each connection keeps one request in flight (it sends its frame again as soon as the answer
is whole), as a member heartbeating or committing as fast as it can would, and as Kafka serves
a connection (one request at a time). Load runs in `procs` processes, each on its own event
loop, so the client can be shown not to be the bottleneck: every run reports the client's CPU
per process next to the server's CPU per request.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue
import resource
import ssl
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_SIZE = struct.Struct(">i")
# Load processes are spawned, not forked: a fork copies whatever lock another thread of the
# parent holds at that instant (a test run's server threads, Spark's gateway threads), and a
# child that needs it waits forever. It did, once in CI.
SPAWN = mp.get_context("spawn")


def frame(request: Any, version: int, client_id: str = "pump") -> bytes:
    """A kafka-python request as framed bytes (size, header, body)."""
    request.API_VERSION = version
    request.with_header(correlation_id=7, client_id=client_id)
    return bytes(request.encode(version=version, header=True, framed=True))


class Pump(asyncio.Protocol):
    """Sends `first` (a login, say) and its frame, then the frame again per whole answer;
    the first `skip` answers are the login's."""

    def __init__(self, first: bytes, frame: bytes, skip: int = 0) -> None:
        self.first, self.frame, self.skip = first, frame, skip
        self.buf = b""
        self.answers = 0
        # The last whole answer (size prefix dropped): whoever measures can check it was
        # not an error, so that a rate never counts error answers unseen.
        self.last = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.first + self.frame)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, whole, start = 0, 0, 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            start = pos
            pos += 4 + size
            whole += 1
        self.buf = buf[pos:]
        if whole:
            self.last = buf[start + 4 : pos]
            taken = min(whole, self.skip)
            self.skip -= taken
            self.answers += whole - taken
            for _ in range(whole - taken):
                self.transport.write(self.frame)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    ca: str | None = None  # TLS with this CA file; None: plaintext
    first: bytes = b""  # sent once per connection before the load (a login)
    skip: int = 0  # answers to `first`

    @classmethod
    def parse(cls, address: str, **kw: Any) -> Target:
        host, port = address.rsplit(":", 1)
        return cls(host, int(port), **kw)

    def context(self) -> ssl.SSLContext | None:
        return None if self.ca is None else ssl.create_default_context(cafile=self.ca)


def _worker(target: Target, frames: list[bytes], secs: float, q: Any) -> None:
    import uvloop

    async def run() -> None:
        loop = asyncio.get_running_loop()
        context = target.context()
        pumps: list[Pump] = []
        for f in frames:
            _, pump = await loop.create_connection(
                lambda f=f: Pump(target.first, f, target.skip),
                target.host,
                target.port,
                ssl=context,
                server_hostname=target.host if context else None,
            )
            pumps.append(pump)
        await asyncio.sleep(1.0)  # every connection past its first answers
        a0, t0, r0 = sum(p.answers for p in pumps), time.perf_counter(), own_cpu()
        await asyncio.sleep(secs)
        a1, t1, r1 = sum(p.answers for p in pumps), time.perf_counter(), own_cpu()
        for pump in pumps:
            pump.transport.close()
        q.put((a1 - a0, t1 - t0, (r1 - r0) / (t1 - t0), [p.last for p in pumps]))

    uvloop.run(run())


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def receive(q: Any, workers: Sequence[Any], deadline: float, what: str = "load") -> Any:
    """The next message the workers put on `q`. A worker that dies without reporting fails
    the run at once, where waiting on the queue alone would sit out the whole timeout;
    silence past `deadline` (time.monotonic) is a TimeoutError."""
    while True:
        try:
            return q.get(timeout=0.5)
        except queue.Empty:
            failed = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a {what} process exited with status {failed[0]}") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} processes silent past their deadline") from None


def gather(q: Any, workers: Sequence[Any], timeout_s: float) -> list[Any]:
    """One result from each worker (see `receive`)."""
    deadline = time.monotonic() + timeout_s
    return [receive(q, workers, deadline) for _ in workers]


def server_cpu(pid: int) -> float:
    """CPU seconds a process has used (user + system)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Rate:
    per_second: float
    client_cpu: list[float]  # cores, per load process
    server_cores: float  # 0.0 without a pid
    server_us: float  # server CPU microseconds per request; 0.0 without a pid
    # Each connection's last answer (response header and body), to check for errors.
    last_answers: tuple[bytes, ...] = ()

    def line(self) -> str:
        clients = ", ".join(f"{c:.2f}" for c in self.client_cpu)
        server = (
            f"server {self.server_cores:.2f} cores, {self.server_us:.1f} us/request"
            if self.server_cores
            else "server CPU not measured"
        )
        return f"{self.per_second:>10,.0f}/s   client CPU per process [{clients}]   {server}"


def pump(target: Target, frames: list[bytes], procs: int, secs: float, pid: int = 0) -> Rate:
    """Requests per second over `frames` (one connection each) from `procs` processes."""
    q: Any = SPAWN.Queue()
    workers = [
        SPAWN.Process(target=_worker, args=(target, frames[i::procs], secs, q))
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    time.sleep(1.0)
    c0, w0 = (server_cpu(pid) if pid else 0.0), time.perf_counter()
    results = gather(q, workers, secs + 120)
    c1, w1 = (server_cpu(pid) if pid else 0.0), time.perf_counter()
    for w in workers:
        w.join(30)
    rate = sum(n for n, _, _, _ in results) / max(d for _, d, _, _ in results)
    cores = (c1 - c0) / (w1 - w0)
    return Rate(
        rate,
        [c for _, _, c, _ in results],
        cores,
        1e6 * cores / rate if rate and pid else 0.0,
        tuple(answer for _, _, _, answers in results for answer in answers),
    )
