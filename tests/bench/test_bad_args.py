"""Wrong arguments to the bench commands: a one-line message and exit status 2, never a
traceback, and never a server left running. No Spark and no load: every case fails in the
argument checks (or against a server started here on 127.0.0.1, ports 29950-29999)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from minicoord.bench import arg_checks, lean
from minicoord.bench.load_stats import saturation
from minicoord.server.process import ServerProcess, start_server_process

PORTS = range(29950, 30000)


def free_port() -> int:
    """A port of the range nothing listens on now."""
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in 29950-29999")


def marked_processes(mark: str) -> list[int]:
    """Pids of the processes whose environment holds `mark` (a run's children inherit it)."""
    found = []
    needle = f"BENCH_BAD_ARGS_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def run_bench(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`minicoord bench ARGS` in a child (in `env`, else this environment); asserts that
    nothing it started outlives it."""
    mark = uuid.uuid4().hex
    env = {**(os.environ if env is None else env), "BENCH_BAD_ARGS_MARK": mark}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "minicoord.bench.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    took = time.monotonic() - started
    left = marked_processes(mark)
    for pid in left:  # not to leave them behind the failing test either
        os.kill(pid, 9)
    assert not left, f"processes left running: {left}"
    return done, took


def assert_one_line_error(done: subprocess.CompletedProcess[str], prog: str, *words: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, done.stderr
    # Nothing after the error line; before it, at most argparse's usage.
    assert done.stderr.rstrip("\n").splitlines()[-1] == errors[0]
    assert errors[0].startswith(f"{prog}: error: "), done.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


LEAN = "minicoord bench lean"
SMALL = ("--api", "heartbeat", "--members", "2", "--procs", "1", "--rounds", "1", "--secs", "0.5")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--compare-bootstrap", "bad"], ["--compare-bootstrap", "HOST:PORT"]),
        (["--compare-bootstrap", "127.0.0.1:70000"], ["1-65535"]),
        (["--compare-bootstrap", "127.0.0.1:"], ["--compare-bootstrap"]),
        (["--procs", "0"], ["--procs"]),
        (["--members", "0"], ["--members"]),
        (["--secs", "0"], ["--secs"]),
        (["--secs", "-1"], ["--secs"]),
        (["--rounds", "0"], ["--rounds"]),
        (["--join-size", "0"], ["--join-size"]),
        (["--api", "produce"], ["produce"]),
        (["--compare-pid", "-1"], ["--compare-pid"]),
    ],
)
def test_lean_refuses_bad_arguments_before_starting_anything(
    args: list[str], words: list[str]
) -> None:
    done, took = run_bench("lean", *SMALL, *args)
    assert_one_line_error(done, LEAN, *words)
    assert took < 20


def test_lean_with_a_malformed_peer_starts_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 1 in-process too: the address is refused before any server is started."""
    started: list[Any] = []
    monkeypatch.setattr(
        "minicoord.server.process.start_server_process", lambda *a, **k: started.append(a)
    )
    with pytest.raises(SystemExit) as exit_:
        lean.main(["--compare-bootstrap", "bad", "--api", "heartbeat"])
    assert exit_.value.code == 2
    assert started == []


def test_lean_stops_its_server_when_the_run_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever fails once the server is up, the server is stopped (its pid gone)."""
    servers: list[ServerProcess] = []

    def start(*args: Any, **kwargs: Any) -> ServerProcess:
        server = start_server_process(*args, **{**kwargs, "port": free_port()})
        servers.append(server)
        return server

    def boom(*args: Any) -> None:
        raise RuntimeError("the run failed")

    monkeypatch.setattr("minicoord.server.process.start_server_process", start)
    monkeypatch.setattr(lean, "run_api", boom)
    with pytest.raises(RuntimeError, match="the run failed"):
        lean.main(["--api", "heartbeat", "--members", "2", "--procs", "1"])
    assert len(servers) == 1
    assert servers[0].proc.poll() is not None
    assert not Path(f"/proc/{servers[0].proc.pid}").exists()


def test_lean_names_an_unreachable_peer_at_once() -> None:
    port = free_port()
    done, took = run_bench("lean", *SMALL, "--compare-bootstrap", f"127.0.0.1:{port}")
    assert_one_line_error(done, LEAN, f"127.0.0.1:{port}", "cannot reach")
    assert took < 20


@pytest.mark.parametrize(
    ("topics", "words"),
    [
        ([], ["has no topic 'bench' with 64 partitions", "-partitions 64", "--topic bench:64"]),
        ([("bench", 8)], ["'bench' with 8 partitions, not 64", "--topic bench:64"]),
    ],
)
def test_lean_says_what_the_peer_lacks(topics: list[tuple[str, int]], words: list[str]) -> None:
    peer = start_server_process(topics=topics, port=free_port())
    try:
        done, took = run_bench("lean", *SMALL, "--compare-bootstrap", peer.bootstrap)
    finally:
        peer.stop()
    line = assert_one_line_error(done, LEAN, peer.bootstrap, *words)
    assert "did not settle" not in line
    assert took < 20


DISPATCH = "minicoord bench dispatch"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--turns", "0"], ["--turns"]),
        (["--per-turn", "0"], ["--per-turn"]),
        (["--turns", "-3"], ["--turns"]),
        (["--api", ","], ["--api"]),
    ],
)
def test_dispatch_refuses_bad_arguments(args: list[str], words: list[str]) -> None:
    done, _ = run_bench("dispatch", "--api", "heartbeat", *args)
    assert_one_line_error(done, DISPATCH, *words)


FOOTPRINT = "minicoord bench footprint"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--members", "0"], ["--members"]),
        (["--compare-bootstrap", "bad"], ["--compare-bootstrap", "HOST:PORT"]),
        (["--compare-bootstrap", "127.0.0.1:0"], ["1-65535"]),
    ],
)
def test_footprint_refuses_bad_arguments(args: list[str], words: list[str]) -> None:
    done, _ = run_bench("footprint", *args)
    assert_one_line_error(done, FOOTPRINT, *words)


def test_footprint_names_an_unreachable_peer() -> None:
    port = free_port()
    done, _ = run_bench("footprint", "--compare-bootstrap", f"127.0.0.1:{port}")
    assert_one_line_error(done, FOOTPRINT, f"127.0.0.1:{port}", "cannot reach")


@pytest.mark.parametrize("module", ["lean", "footprint", "dispatch_cost"])
def test_help_texts_are_whole(module: str) -> None:
    """Descriptions not cut off mid-sentence; every option says what it is."""
    import importlib

    parser = importlib.import_module(f"minicoord.bench.{module}").build_parser()
    assert parser.description
    assert parser.description.rstrip().endswith("."), parser.description
    for action in parser._actions:
        assert action.help, action.option_strings
    assert "Traceback" not in parser.format_help()


BENCH = "minicoord bench"
OUT = ("--out", "/tmp/bench-bad-args-unused", "--no-progress")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--bootstrap", "bad"], ["--bootstrap", "HOST:PORT"]),
        (["--bootstrap", "127.0.0.1:70000"], ["--bootstrap", "1-65535"]),
        (["--bootstrap", "127.0.0.1:x"], ["--bootstrap", "numeric"]),
        (["--compare-bootstrap", "bad"], ["--compare-bootstrap"]),
        (["--tasks", "0"], ["--tasks"]),
        (["--groups", "0"], ["--groups"]),
        (["--members", "0"], ["--members"]),
        (["--partitions", "0"], ["--partitions"]),
        (["--compare-rounds", "0"], ["--compare-rounds"]),
        (["--members-per-connection", "0"], ["--members-per-connection"]),
        (["--session-timeout-ms", "0"], ["--session-timeout-ms"]),
        (["--timeout-s", "0"], ["--timeout-s"]),
        (["--duration-s", "0"], ["--duration-s"]),
        (["--slots-timeout-s", "-1"], ["--slots-timeout-s"]),
        (["--compare-pid", "999999999", "--compare-bootstrap", "127.0.0.1:1"], ["--compare-pid"]),
        (["--server-config", "bogus.cfg=1"], ["--server-config", "unknown config 'bogus.cfg'"]),
        (["--server-config", "group.max.size=x"], ["--server-config"]),
    ],
)
def test_spark_scenarios_refuse_bad_arguments_before_spark(
    args: list[str], words: list[str]
) -> None:
    done, took = run_bench("cold-join", *OUT, *args)
    assert_one_line_error(done, BENCH, *words)
    assert took < 20  # Spark alone takes longer to start
    assert not Path(OUT[1]).exists()


def test_spark_scenarios_check_the_servers_are_there_before_spark() -> None:
    port = free_port()
    for option in ("--bootstrap", "--compare-bootstrap"):
        done, took = run_bench("cold-join", *OUT, option, f"127.0.0.1:{port}")
        assert_one_line_error(done, BENCH, option, f"127.0.0.1:{port}", "cannot reach")
        assert took < 20


def test_a_server_that_exits_at_once_is_reported_with_its_own_line() -> None:
    """Past the argument checks (a bench run as a library), start_targets still names the
    server's own error, at once, as a ClusterNotReady (exit 2 in the command line)."""
    from minicoord.bench.cluster_checks import ClusterNotReady
    from minicoord.bench.targets import start_targets

    o = {
        "bootstrap": None,
        "server_config": {"bogus.cfg": "1"},
        "scenario": "cold-join",
        "server_storage": "memory",
        "server_cpus": None,
        "compare": False,
        "compare_bootstrap": None,
        "out": "/tmp/bench-bad-args-unused",
    }
    started = time.monotonic()
    with pytest.raises(ClusterNotReady, match=r"unknown config 'bogus\.cfg'"):
        start_targets(o, lambda _: None)
    assert time.monotonic() - started < 10


def test_addresses() -> None:
    assert arg_checks.parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert arg_checks.parse_address("[::1]:9092") == ("::1", 9092)
    for bad in ("bad", ":9092", "h:0", "h:65536", "h:port", "h:"):
        with pytest.raises(ValueError):
            arg_checks.parse_address(bad)


def test_server_cpu_not_read_is_not_measured_rather_than_zero() -> None:
    steps = [
        {"target": "minicoord", "offered_per_s": None, "achieved_per_s": 900.0,
         "per_server_cpu_second": None},
        {"target": "minicoord", "offered_per_s": 500, "achieved_per_s": 500.0,
         "per_server_cpu_second": None},
        {"target": "other", "offered_per_s": None, "achieved_per_s": 800.0,
         "per_server_cpu_second": 12000.0},
    ]  # fmt: skip
    result = saturation(steps)
    assert result["minicoord"]["max_per_server_cpu_second"] is None
    assert result["other"]["max_per_server_cpu_second"] == 12000.0


def test_an_out_folder_that_holds_a_run_is_refused(tmp_path: Path) -> None:
    """Jobs append to raw.parquet: an earlier run's rows would be counted as this run's."""
    out = tmp_path / "run"
    (out / "raw.parquet").mkdir(parents=True)
    (out / "summary.json").write_text("{}")
    done, took = run_bench("cold-join", "--out", str(out), "--no-progress")
    assert_one_line_error(done, BENCH, f"--out {out} already holds")
    assert took < 20
    assert sorted(p.name for p in out.iterdir()) == ["raw.parquet", "summary.json"]


def test_an_empty_out_folder_is_taken(tmp_path: Path) -> None:
    import argparse

    from minicoord.bench.scenario_args import check_out

    parser = argparse.ArgumentParser(prog=BENCH)
    check_out(parser, {"out": str(tmp_path)})  # empty: no error
    check_out(parser, {"out": str(tmp_path / "new")})  # not there yet: no error
    (tmp_path / "leftover").write_text("")
    with pytest.raises(SystemExit) as exit_:
        check_out(parser, {"out": str(tmp_path)})
    assert exit_.value.code == 2


@pytest.mark.parametrize("java_home", [None, "/nonexistent"])
def test_no_java_is_named_before_spark(tmp_path: Path, java_home: str | None) -> None:
    """Without a java Spark would print its gateway's traceback after trying to start."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # nothing there; the child is started by its full path
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    out = tmp_path / "out"
    done, took = run_bench("cold-join", "--out", str(out), "--no-progress", env=env)
    words = ["Java 17+", "install a JDK or JRE 17+"]
    words += ["JAVA_HOME=/nonexistent has no"] if java_home else ["no java on PATH"]
    assert_one_line_error(done, BENCH, *words)
    assert took < 20
    assert not out.exists()


def test_a_bootstrap_that_is_not_kafka_is_one_line(tmp_path: Path) -> None:
    """Something listens (an HTTP port, say), but it is no Kafka server: prepare_topic says
    so in one line (exit 2 from the command) instead of the client's traceback."""
    import threading

    from minicoord.bench.cluster_checks import ClusterNotReady
    from minicoord.bench.targets import Target, prepare_topic

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_http() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    server = threading.Thread(target=answer_http, daemon=True)
    server.start()
    try:
        with pytest.raises(ClusterNotReady) as raised:
            prepare_topic(Target("minicoord", f"127.0.0.1:{port}"), "bench", 2)
    finally:
        server.join(10)
        listener.close()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"minicoord at 127.0.0.1:{port} did not answer CreateTopics")


def test_every_spark_scenario_option_says_what_it_is() -> None:
    from minicoord.bench.scenario_args import build_parser

    for action in build_parser()._actions:
        if action.dest != "scenario":
            assert action.help, action.option_strings


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--members", "0"], "--members"),
        (["--logins", "0"], "--logins"),
        (["--secs", "0"], "--secs"),
    ],
)
def test_the_security_bench_refuses_bad_arguments_before_its_server(
    args: list[str], flag: str
) -> None:
    # It waited for a member-less group, or divided by zero logins, after starting a server.
    done = subprocess.run(
        [sys.executable, "-m", "minicoord.bench.security_bench", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_one_line_error(done, "security_bench.py", flag, "must be")
