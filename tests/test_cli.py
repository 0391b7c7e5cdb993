"""`minicoord serve` as users and scripts run it."""

from __future__ import annotations

import signal
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
        (["--topic", "bad name:3"], "has characters other than"),
        (["--acl", "allow User:a Read"], "PERMISSION PRINCIPAL OPERATION TYPE:NAME"),
        (["--acl", "allow User:a Fly group:g"], "unknown operation 'Fly'"),
        (["--config", "authorizer.class.name=x.Mine"], "authorizer.class.name is empty"),
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
    assert "minicoord.server.cli:main" in result.stdout
