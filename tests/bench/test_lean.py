"""`minicoord bench lean` end to end at a tiny scale: members join each API's group on a real
server over 127.0.0.1, the load processes get answers, and every line reports a rate, the
client's CPU per process and the server's CPU per request. No figure is asserted."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from minicoord.bench.cli import main as bench_main
from minicoord.server.process import ServerProcess


def test_lean_compares_each_api_against_a_peer(
    capsys: pytest.CaptureFixture[str], server_factory: Callable[..., ServerProcess]
) -> None:
    # A second minicoord stands in for the peer: what is checked is the comparison's shape.
    peer = server_factory(topics=[("bench", 64)])
    args = ["lean", "--members", "3", "--procs", "1", "--secs", "0.5", "--rounds", "2"]
    args += ["--compare-bootstrap", f"127.0.0.1:{peer.port}"]
    args += ["--compare-pid", str(peer.proc.pid)]
    assert bench_main(args) == 0
    out = capsys.readouterr().out
    # Every connection's last answer was checked, and none was an error.
    assert "ERRORS" not in out, out
    for api in ("heartbeat", "commit", "cghb"):
        section = out.split(f"{api}:", 1)[1].split("median", 1)
        rounds = re.findall(r"round \d (\S+)\s+([\d,]+)/s .*server [\d.]+ cores", section[0])
        assert sorted({name for name, _ in rounds}) == ["minicoord", "peer"]
        assert len(rounds) == 4
        assert all(int(rate.replace(",", "")) > 0 for _, rate in rounds)
        assert re.match(r" [\d.]+ \(rounds [\d.]+ / [\d.]+\)", section[1])


def test_error_answers_are_named() -> None:
    # The check behind the ERRORS line: answers as the load processes keep them (header v1,
    # then the body), one good and two refused.
    from kafka.protocol.consumer import HeartbeatResponse
    from minicoord.bench.lean import answer_errors

    def answer(error: int) -> bytes:
        body = HeartbeatResponse(version=4, throttle_time_ms=0, error_code=error).encode()
        return b"\x00\x00\x00\x07\x00" + bytes(body)

    assert answer_errors("heartbeat", [answer(0), answer(25), answer(25)]) == {
        "UNKNOWN_MEMBER_ID": 2
    }


def test_lean_refuses_an_unknown_api() -> None:
    with pytest.raises(SystemExit):
        bench_main(["lean", "--api", "produce"])


def test_a_load_process_that_dies_fails_the_run_at_once() -> None:
    # A worker that exits without reporting (here: a port nothing listens on) must not
    # leave the run waiting out its timeout on the queue.
    import socket
    import time

    from minicoord.bench.pump import Target, pump

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="exited with status"):
            pump(Target("127.0.0.1", port), [b"x"], procs=1, secs=0.5)
    assert time.monotonic() - t0 < 60


def test_a_peer_refusing_the_joins_is_named_once(
    capsys: pytest.CaptureFixture[str], server_factory: Callable[..., ServerProcess]
) -> None:
    """bench footprint's members ask for 5-minute sessions: a server that allows 1 minute
    refuses every join, and the reason is printed once, not waited out in silence."""
    from minicoord.bench import lean
    from minicoord.bench.pump import Target

    peer = server_factory({"group.max.session.timeout.ms": 60_000}, topics=[("bench", 64)])
    target = Target("127.0.0.1", peer.port)

    async def join() -> None:
        await lean.join_classic(target, "refused", 3, session_timeout_ms=300_000, settle_s=2)

    with pytest.raises(SystemExit, match="did not settle"):
        asyncio.run(join())
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"joins to 127.0.0.1:{peer.port} keep failing: INVALID_SESSION_TIMEOUT (the members "
        "ask for 300,000 ms sessions: the server must allow them, e.g. "
        "group.max.session.timeout.ms of at least 300000)"
    ]


def _descendants(pid: int) -> set[int]:
    """Every live process under `pid`, from /proc's parent links."""
    import os

    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # The field after the parenthesised name is the state, then the parent.
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_terminated_bench_stops_the_servers_it_started(tmp_path: Path) -> None:
    # A CI job that times out, or a user's `kill`, sends SIGTERM: the bench's servers and
    # load processes must go with it, not stay listening with no one to stop them, and the
    # write-policy server's data directory (made under TMPDIR) with them.
    import os
    import signal
    import subprocess
    import time

    cmd = [sys.executable, "-m", "minicoord.server.cli", "bench", "lean", "--api", "heartbeat"]
    cmd += ["--members", "2", "--procs", "1", "--secs", "30", "--rounds", "3", "--write-too"]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    bench = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        # Running once its server and a load process are up (the load runs 30 s a round).
        while len(started) < 2 and time.monotonic() < deadline and bench.poll() is None:
            time.sleep(0.2)
            started = _descendants(bench.pid)
        assert len(started) >= 2, f"bench did not start its server and load: {started}"
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 15
        while (alive := {p for p in started if os.path.exists(f"/proc/{p}")}) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert not alive, f"left running after the bench ended: {alive}"
        assert list(tmp_path.glob("minicoord-lean-*")) == []
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(10)
        for pid in started:  # what a failure left running
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)
