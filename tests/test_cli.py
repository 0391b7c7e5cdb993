"""`minicoord serve` as users and scripts run it."""

from __future__ import annotations

import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest
from minicoord.server.process import READY_PREFIX, start_server_process


def test_ready_line_is_the_only_stdout_and_sigterm_exits_zero() -> None:
    server = start_server_process(topics=[("orders", 3)])
    assert server.port > 0
    server.proc.send_signal(signal.SIGTERM)
    out, _ = server.proc.communicate(timeout=10)
    assert server.proc.returncode == 0
    # The ready line was consumed by start_server_process; nothing else may follow on stdout.
    assert out == ""


def test_ready_line_names_the_bound_address() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX + "127.0.0.1:")
        assert int(line.rsplit(":", 1)[1]) > 0
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "no.such.setting=1"], "unknown config 'no.such.setting'"),
        (["--config", "group.max.size=lots"], "group.max.size takes an integer"),
        (["--config", "auto.create.topics.enable=maybe"], "takes true or false"),
        (["--config", "justakey"], "expected key=value"),
        (["--topic", "orders"], "expected NAME:PARTITIONS"),
        (["--topic", "bad name:3"], "contains one or more characters other than"),
        # Refused before the ready line: found after it, these crashed the started server.
        (["--topic", "__consumer_offsets:3"], "__consumer_offsets is the server's own topic"),
        (["--topic", "__cluster_metadata:1"], "__cluster_metadata is the server's own topic"),
        (["--in-memory", "--topic", "big:2000000"], "more than CreateTopics allows"),
        (["--acl", "allow User:a Read"], "PERMISSION PRINCIPAL OPERATION TYPE:NAME"),
        (["--acl", "allow User:a Fly group:g"], "unknown operation 'Fly'"),
        (["--config", "authorizer.class.name=x.Mine"], "authorizer.class.name is empty"),
        # Not wrapped into 16 bits by the bind (70000 would serve on 4464), nor a traceback.
        (["--port", "99999"], "argument --port: 99999 is not a port (0-65535)"),
        (["--metrics-port", "70000"], "argument --metrics-port: 70000 is not a port"),
        (["--control-port", "-1"], "argument --control-port: -1 is not a port"),
        (["--config", "advertised.listeners=PLAINTEXT://0.0.0.0:9092"], "meta-address"),
    ],
)
def test_bad_arguments_exit_with_a_message(args: list[str], message: str) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert time.monotonic() - started < 20


def test_console_script_is_installed() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.metadata as m; print([e.value for e in "
            "m.entry_points(group='console_scripts') if e.name == 'minicoord'])",
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert "minicoord.server.cli:run" in result.stdout


def _serve_in_memory() -> tuple[subprocess.Popen[str], str]:
    """`minicoord serve --port 0 --in-memory`, and its ready line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0", "--in-memory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline()


def _api_versions(host: str, port: int, correlation_id: int) -> tuple[int, int]:
    """An ApiVersions v0 over a new connection: the answer's correlation id and error code."""
    import socket
    import struct

    with socket.create_connection((host, port), timeout=10) as sock:
        header = struct.pack(">hhih", 18, 0, correlation_id, 1) + b"c"
        sock.sendall(struct.pack(">i", len(header)) + header)
        size = struct.unpack(">i", sock.recv(4))[0]
        answer = b""
        while len(answer) < size:
            answer += sock.recv(size - len(answer))
    return struct.unpack_from(">ih", answer)


def test_in_memory_server_binds_first_and_answers_a_client_that_connects_at_once() -> None:
    # The ready line comes before the coordinator is loaded (server/early_listen.py): a client
    # that connects on reading it waits in the backlog and is answered, and SIGTERM sent
    # while the server may still be loading stops it cleanly.
    proc, line = _serve_in_memory()
    try:
        assert line.startswith(READY_PREFIX + "127.0.0.1:")
        port = int(line.rsplit(":", 1)[1])
        assert _api_versions("127.0.0.1", port, 7) == (7, 0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    assert proc.returncode == 0


def test_sigterm_right_after_the_early_ready_line_exits_zero() -> None:
    proc, line = _serve_in_memory()
    assert line.startswith(READY_PREFIX)
    proc.send_signal(signal.SIGTERM)  # most likely while it still imports the coordinator
    proc.wait(10)
    assert proc.returncode == 0


_FORGETS_PARSER = """
import gc, os, signal, sys, threading, time, types

PARSER = ("argparse", "gettext", "minicoord.server.arguments")


def watch() -> None:
    deadline = time.monotonic() + 60
    while "minicoord.server.app" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.02)
    alive = sorted(
        {o.__name__ for o in gc.get_objects() if isinstance(o, types.ModuleType)} & set(PARSER)
    )
    listed = [m for m in PARSER if m in sys.modules]
    print("parser modules alive:", alive, "in sys.modules:", listed, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=watch, daemon=True).start()
sys.argv = ["minicoord", "serve", "--port", "0", "--in-memory"]
from minicoord.server.cli import run

sys.exit(run())
"""


def test_the_console_script_lets_the_parser_go_before_the_server_loads() -> None:
    # argparse and gettext are about 0.35 MB of a serving process; the server's modules reuse
    # the space only if the modules are really gone (no Namespace, no module global left).
    result = subprocess.run(
        [sys.executable, "-c", _FORGETS_PARSER], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(READY_PREFIX)
    assert "parser modules alive: [] in sys.modules: []" in lines


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_server_with_a_data_dir_binds_its_address_without_a_resolver(
    host: str, tmp_path: pathlib.Path
) -> None:
    # Such a server loads its logs before it binds. Handed an IP literal, it binds the socket
    # itself: asyncio would resolve the literal on libuv's thread pool, which keeps four
    # threads for the life of the process.
    proc = subprocess.Popen(
        [sys.executable, "-m", "minicoord.server.cli", "serve", "--host", host, "--port", "0",
         "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        shown = f"[{host}]" if ":" in host else host
        assert line.startswith(f"{READY_PREFIX}{shown}:"), line
        port = int(line.rsplit(":", 1)[1])
        assert _api_versions(host, port, 11) == (11, 0)
        assert _threads(proc.pid) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    assert proc.returncode == 0


def test_topic_arguments_that_collide_create_the_first_and_warn_of_the_second() -> None:
    from confluent_kafka.admin import AdminClient

    server = start_server_process(topics=[("orders.eu", 2), ("orders_eu", 3)])
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        topics = admin.list_topics(timeout=10).topics
        assert "orders.eu" in topics and "orders_eu" not in topics
        assert len(topics["orders.eu"].partitions) == 2
        warning = "--topic orders_eu collides with the topic orders.eu; not created"
        deadline = time.monotonic() + 10  # the log is read by a thread of its own
        while warning not in server.log and time.monotonic() < deadline:
            time.sleep(0.05)
        assert warning in server.log
    finally:
        server.stop()


def test_a_failure_names_what_failed_not_the_kafka_port(tmp_path: pathlib.Path) -> None:
    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=20)

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = serve("--data-dir", str(not_a_dir / "data"))
    assert result.returncode == 2
    assert f"minicoord: cannot use {not_a_dir}" in result.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--in-memory", "--metrics-port", str(port))
        assert result.returncode == 1
        assert (
            f"cannot listen: error while attempting to bind on address ('127.0.0.1', {port})"
            in (result.stderr)
        )
        result = serve("--in-memory", "--port", str(port))
        assert result.returncode == 1
        assert f"('127.0.0.1', {port}): address already in use" in result.stderr
