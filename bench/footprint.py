"""`minicoord bench footprint`: start-up time and memory, against a bare uvloop server (the
floor any asyncio server on this interpreter stands on) and, optionally, a peer.

    minicoord bench footprint [--starts 10] [--members 5000] [--group-size 100] \\
        [--compare-bootstrap 127.0.0.1:9093 --compare-pid PID --compare-name kfake]

Three measures, each printed with the floor's beside it:
- start to ready: `minicoord serve --port 0 --in-memory` until its ready line, against a bare
  uvloop server that binds and prints a line; `--starts` runs of each, interleaved, medians;
- idle RSS: each one's VmRSS a second after its ready line, before any client;
- RSS per member: `--members` classic members in groups of `--group-size`, one connection
  each, joined to a fresh minicoord (after one warm-up group has loaded the codecs), half of
  them and then the rest, each group heartbeating until it settles: RSS growth per member over
  all of them and over the second half alone (which leaves out whatever free space the
  allocator had at the start). The floor holds as many bare connections; a peer (on this
  host, `--compare-pid`) gets the same members as minicoord. With `--joins by-group` the
  groups join one after another instead of all of a half at once: a server's RSS keeps what
  its allocator grew to at the peak, so the two differ by the joins' transient memory.

Memory is the kernel's VmRSS from /proc, in KiB. Joins run from this process's event loop,
so it raises its open-file limit to the hard limit (each server inherits it).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from minicoord.bench.arg_checks import add_peer_options
from minicoord.bench.proc_stats import rss_kib
from minicoord.server.process import ServerProcess

TOPIC = "bench"
PARTITIONS = 64

# A server with nothing of minicoord in it: the interpreter, uvloop, one listener, and a
# protocol that keeps each connection's transport, as any server must.
BARE_SERVER = """
import asyncio, uvloop
held = set()
class Keep(asyncio.Protocol):
    __slots__ = ("transport",)
    def connection_made(self, transport):
        self.transport = transport
        held.add(self)
async def main():
    server = await asyncio.get_running_loop().create_server(Keep, "127.0.0.1", 0)
    print("bare listening on 127.0.0.1:%d" % server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
uvloop.run(main())
"""


def minicoord_command(*extra: str) -> list[str]:
    serve = ["serve", "--port", "0", "--in-memory", *extra]
    return [sys.executable, "-m", "minicoord.server.cli", *serve]


BARE_COMMAND = [sys.executable, "-c", BARE_SERVER]


def start(command: list[str], timeout: float = 30) -> tuple[ServerProcess, float]:
    """Run `command` until its first line, which must say where it listens; the server and
    how long the line took, in ms."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
    )
    assert proc.stdout is not None
    # Waited for with a bound: a server that hangs before its line must not hang the bench.
    # (A server that dies first closes stdout: readline returns "".)
    readable, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if readable else ""
    ready_ms = (time.perf_counter() - t0) * 1000
    if "listening on" not in line:
        proc.kill()
        proc.wait(10)
        raise SystemExit(f"{command[:4]} printed no ready line: {line!r}")
    return ServerProcess(proc, "127.0.0.1", int(line.rsplit(":", 1)[1].split()[0])), ready_ms


def _spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f} ms ({min(values):.1f}-{max(values):.1f})"


def start_up(starts: int) -> tuple[float, float]:
    """Median start-to-ready of minicoord and of the bare server, interleaved; printed."""
    times: dict[str, list[float]] = {"minicoord": [], "bare": []}
    idle: dict[str, int | None] = {}
    commands = {"minicoord": minicoord_command(), "bare": BARE_COMMAND}
    for i in range(starts):
        for name, command in commands.items():
            server, ready_ms = start(command)
            times[name].append(ready_ms)
            if i == starts - 1:
                time.sleep(1.0)
                idle[name] = rss_kib(server.proc.pid)
            server.stop()
    mc, bare = statistics.median(times["minicoord"]), statistics.median(times["bare"])
    print(f"start to ready, median of {starts} interleaved:")
    print(f"  minicoord    {_spread(times['minicoord'])}")
    print(f"  bare uvloop  {_spread(times['bare'])}")
    print(f"  minicoord / bare uvloop: {mc / bare:.2f}")
    print("idle RSS, a second after the ready line:")
    print(f"  minicoord    {idle['minicoord']:,} KiB")
    print(f"  bare uvloop  {idle['bare']:,} KiB")
    return mc, bare


async def _join_groups(
    host: str, port: int, members: int, size: int, tag: str, by_group: bool = False
) -> list[Any]:
    """`members` classic members in groups of `size`, each on its own connection, every
    group settled (one generation holding all its members), then left without heartbeats:
    measured while their 5-minute sessions last. Every group at once, or (`by_group`) one group
    after another. Returns the connections."""
    from minicoord.bench.lean import join_classic
    from minicoord.bench.pump import Target
    from minicoord.clients.connection import ProtocolClient

    target = Target(host, port)

    async def connect(i: int) -> Any:
        return await ProtocolClient.connect(host, port, f"footprint-{i % 8}")

    async def group(g: int) -> list[Any]:
        n = min(size, members - g * size)
        # Heartbeats each second while the groups settle: ten thousand members at a tenth
        # of a second would be the load, not the joins.
        # Sessions of 5 minutes (Kafka's largest by default is 30): the first half must still
        # be there, without heartbeats, when the second half has joined and RSS is read.
        joined = await join_classic(
            target, f"footprint-{tag}-{g}", n, connect, heartbeat_interval_ms=1000,
            settle_s=300, session_timeout_ms=300_000,
        )  # fmt: skip
        return [m.conn for m in joined]

    count = -(-members // size)
    if by_group:
        conns = []
        for g in range(count):
            conns += await group(g)
        return conns
    return [c for part in await asyncio.gather(*(group(g) for g in range(count))) for c in part]


async def _close(conns: Sequence[Any]) -> None:
    await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


def _per(readings: Sequence[int | None], first: int, members: int) -> str:
    """RSS before, after the first `first` members and after all, and the growth per member
    over all of them and over the second part alone."""
    if any(r is None for r in readings):
        return "RSS not readable (not on this host?)"
    before, mid, after = readings
    assert before is not None and mid is not None and after is not None
    line = f"{before:,} -> {mid:,} -> {after:,} KiB: {(after - before) / members:.2f} KiB each"
    return line + f", {(after - mid) / (members - first):.2f} KiB each of the second half"


async def members_rss(
    members: int, size: int, peer: tuple[str, str, int, int] | None, by_group: bool = False
) -> dict[str, float | None]:
    """RSS per member on a fresh minicoord (and the peer), per connection on the bare
    server; printed, and returned by name (KiB; None where unreadable)."""
    out: dict[str, float | None] = {}
    how = "one group after another" if by_group else "every group at once"
    print(f"RSS per member, {members:,} members in groups of {size} ({how}), one connection each:")
    config = ["--config", f"group.max.size={max(size, 1000)}", "--topic", f"{TOPIC}:{PARTITIONS}"]
    config += ["--log-level", "WARNING"]
    targets: list[tuple[str, str, int, int, ServerProcess | None]] = []
    server, _ = start(minicoord_command(*config))
    targets.append(("minicoord", "127.0.0.1", server.port, server.proc.pid, server))
    if peer is not None:
        targets.append((*peer, None))
    # Two halves (whole groups), RSS read after each: the second half's growth leaves out
    # whatever free space the allocator had at the start, which the first half reuses.
    first = (members // size // 2) * size or members // 2
    try:
        for name, host, port, pid, _ in targets:
            warm = await _join_groups(host, port, size, size, f"warm-{time.monotonic_ns()}")
            readings = []
            conns = []
            for n, tag in ((first, "a"), (members - first, "b")):
                await asyncio.sleep(1.0)
                readings.append(rss_kib(pid))
                conns += await _join_groups(
                    host, port, n, size, f"{tag}{time.monotonic_ns()}", by_group
                )
            await asyncio.sleep(1.0)
            readings.append(rss_kib(pid))
            out[name] = _growth(readings, members)
            print(f"  {name:<12} {_per(readings, first, members)}", flush=True)
            await _close(conns + warm)
    finally:
        server.stop()
    bare, _ = start(BARE_COMMAND)
    try:
        socks = await _open(bare.port, size)
        readings = []
        for n in (first, members - first):
            await asyncio.sleep(1.0)
            readings.append(rss_kib(bare.proc.pid))
            socks += await _open(bare.port, n)
        await asyncio.sleep(1.0)
        readings.append(rss_kib(bare.proc.pid))
        out["bare"] = _growth(readings, members)
        print(f"  {'bare uvloop':<12} {_per(readings, first, members)} (connections only)")
        for sock in socks:
            sock.close()
    finally:
        bare.stop()
    return out


def _growth(readings: Sequence[int | None], members: int) -> float | None:
    before, after = readings[0], readings[-1]
    return None if before is None or after is None else (after - before) / members


async def _open(port: int, n: int) -> list[Any]:
    loop = asyncio.get_running_loop()
    transports = []
    for _ in range(n):
        transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
        transports.append(transport)
    return transports


def raise_open_files(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(f"--members needs about {needed} open files; the hard limit is {hard}")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minicoord bench footprint",
        description="start-up time and memory (idle RSS, RSS per group member) of minicoord, "
        "against a bare uvloop server (the floor any asyncio server on this interpreter "
        "stands on) and, optionally, a peer.",
    )
    p.add_argument("--starts", type=int, default=10, help="start-ups of each server (10)")
    p.add_argument("--members", type=int, default=5000, help="members joined (5000)")
    p.add_argument("--group-size", type=int, default=100, help="members per group (100)")
    p.add_argument(
        "--joins",
        choices=["together", "by-group"],
        default="together",
        help="every group joins at once (together, the default) or one after another: "
        "the first leaves the free space of its peak in the server's allocator",
    )
    add_peer_options(p, "a peer to compare with", "RSS")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    import uvloop
    from minicoord.bench.arg_checks import peer_address, require_reachable

    parser = build_parser()
    o = parser.parse_args(argv)
    if o.starts < 1 or o.members < 1 or o.group_size < 1:
        parser.error("--starts, --members and --group-size must be positive")
    address = peer_address(parser, o, ("minicoord", "bare"))
    if address is not None:
        require_reachable(parser.prog, "--compare-bootstrap", address)
    # This process holds every member's connection, and each server the other end.
    raise_open_files(o.members + o.group_size + 256)
    start_up(o.starts)
    peer = None
    if address is not None:
        peer = (o.compare_name, *address, o.compare_pid)
    uvloop.run(members_rss(o.members, o.group_size, peer, o.joins == "by-group"))
    return 0
