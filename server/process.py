"""Run `minicoord serve` as a child process on an ephemeral port (tests, benchmarks).

The child is the real command line; its ready line gives the port it bound."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import field

from minicoord.protocol.lean_dataclass import dataclass

READY_PREFIX = "minicoord listening on "


@dataclass
class ServerProcess:
    proc: subprocess.Popen[str]
    host: str
    port: int
    stderr_lines: list[str] = field(default_factory=list)
    # The ready line's listeners, e.g. "127.0.0.1:9092 (PLAINTEXT), 127.0.0.1:9093 (SASL_SSL)".
    listeners: str = ""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log(self) -> str:
        return "".join(self.stderr_lines)

    def stop(self, timeout: float = 10) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def start_server_process(
    configs: dict[str, object] | None = None,
    topics: Iterable[tuple[str, int]] = (),
    timeout: float = 15,
    extra_args: Iterable[str] = (),
    data_dir: str | os.PathLike[str] | None = None,
    port: int = 0,
    preexec_fn: Callable[[], None] | None = None,
) -> ServerProcess:
    """Start a server; with no data_dir it keeps its state in memory (`--in-memory`).
    `preexec_fn` runs in the child before the server does (a resource limit, say)."""
    cmd = [sys.executable, "-m", "minicoord.server.cli", "serve", "--host", "127.0.0.1"]
    cmd += ["--port", str(port)]
    cmd += ["--in-memory"] if data_dir is None else ["--data-dir", os.fspath(data_dir)]
    for key, value in (configs or {}).items():
        cmd += ["--config", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    for name, partitions in topics:
        cmd += ["--topic", f"{name}:{partitions}"]
    cmd += list(extra_args)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=preexec_fn,
    )
    assert proc.stdout is not None and proc.stderr is not None
    server = ServerProcess(proc, "127.0.0.1", 0)

    def drain_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            server.stderr_lines.append(line)

    threading.Thread(target=drain_stderr, daemon=True).start()
    # Read the ready line on a thread so that a server hanging before it cannot hang us.
    ready: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: ready.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = ready.get(timeout=timeout)
    except queue.Empty:
        line = ""
    except BaseException:
        # Stopped while waiting (a bench ended by SIGTERM): the server is not the caller's
        # yet, so nothing else would stop it.
        proc.kill()
        proc.wait(5)
        raise
    if not line.startswith(READY_PREFIX):
        proc.kill()
        proc.wait(5)
        raise RuntimeError(f"server did not start within {timeout} s: {line!r}\n{server.log}")
    # The first listener's address (more listeners follow as ", HOST:PORT (NAME)").
    server.listeners = line[len(READY_PREFIX) :].strip()
    address = server.listeners.split(",")[0].split(" ")[0]
    server.port = int(address.rsplit(":", 1)[1])
    return server
