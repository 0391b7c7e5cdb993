"""Checks of the bench commands' arguments, made before anything starts (a server, Spark):
a wrong one is a one-line message and exit status 2 (argparse's `parser.error`), never a
traceback, and never a process left behind."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from minicoord.clients.connection import parse_address

# A TCP connect to a target: an address where nothing listens fails at once (refused); one
# that drops packets is given this long.
CONNECT_TIMEOUT_S = 5.0


def fail(prog: str, message: str) -> NoReturn:
    """A one-line error, as argparse prints one (without the usage: the arguments were well
    formed, what they name is not there), and exit status 2."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def address_arg(
    parser: argparse.ArgumentParser, option: str, text: str | None
) -> tuple[str, int] | None:
    """`option`'s HOST:PORT, or parser.error saying what is wrong with it."""
    if text is None:
        return None
    try:
        return parse_address(text)
    except ValueError as exc:
        parser.error(f"{option}: {exc}")


def unreachable(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why a plain TCP connection to host:port fails, or None when it opens."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except ConnectionRefusedError:
        return "connection refused (is the server running, on that port?)"
    except OSError as exc:
        return exc.strerror or str(exc)


def require_reachable(prog: str, option: str, address: tuple[str, int]) -> None:
    """Exit 2 with a one-line message naming the address when nothing answers there."""
    host, port = address
    why = unreachable(host, port)
    if why is not None:
        shown = f"[{host}]" if ":" in host else host
        fail(prog, f"cannot reach {option} {shown}:{port}: {why}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def require_at_least(
    parser: argparse.ArgumentParser, values: Any, names: Iterable[str], least: float
) -> None:
    """parser.error unless each named option (left out when None) is at least `least`."""
    for name in names:
        value = values[name] if isinstance(values, dict) else getattr(values, name)
        if value is not None and not value >= least:
            parser.error(f"{_flag(name)} must be at least {least:g}, got {value:g}")


def require_positive(parser: argparse.ArgumentParser, values: Any, names: Iterable[str]) -> None:
    """parser.error unless each named option (left out when None) is above 0."""
    for name in names:
        value = values[name] if isinstance(values, dict) else getattr(values, name)
        if value is not None and not 0 < value < math.inf:
            parser.error(f"{_flag(name)} must be more than 0 (and finite), got {value:g}")


def server_error(exc: BaseException) -> str:
    """The line that says why a server the bench started did not come up: its own last
    line on stderr (e.g. `minicoord: unknown config ...`) when it printed one, else what
    start_server_process said."""
    lines = [line.strip() for line in str(exc).splitlines()]
    said = [line for line in lines[1:] if line]
    return said[-1] if said else (lines[0] if lines else type(exc).__name__)


def add_peer_options(p: argparse.ArgumentParser, bootstrap_help: str, pid_for: str) -> None:
    """--compare-bootstrap, --compare-pid and --compare-name, as `lean` and `footprint` take
    them (`pid_for`: what the peer's pid is read for)."""
    p.add_argument("--compare-bootstrap", metavar="HOST:PORT", help=bootstrap_help)
    p.add_argument(
        "--compare-pid",
        type=int,
        default=0,
        metavar="PID",
        help=f"the peer's pid when it runs on this host, for its {pid_for} (default: not measured)",
    )
    p.add_argument("--compare-name", default="peer", help="the peer's name in the output (peer)")


def require_process(parser: argparse.ArgumentParser, pid: int) -> None:
    """parser.error unless `pid` is a process on this host (its CPU or RSS is read there)."""
    if not os.path.exists(f"/proc/{pid}/stat"):
        parser.error(f"--compare-pid {pid}: no such process on this host")


def peer_address(
    parser: argparse.ArgumentParser, o: argparse.Namespace, taken: tuple[str, ...]
) -> tuple[str, int] | None:
    """The peer's address from the options of add_peer_options, checked (None: no peer);
    `taken` are the names of the targets the command starts itself."""
    require_at_least(parser, o, ("compare_pid",), 0)
    address = address_arg(parser, "--compare-bootstrap", o.compare_bootstrap)
    if o.compare_pid and address is None:
        parser.error("--compare-pid is the --compare-bootstrap server's: give that too")
    if o.compare_pid:
        require_process(parser, o.compare_pid)
    if address is not None and o.compare_name in taken:
        parser.error(f"--compare-name {o.compare_name!r} is the name of another target")
    return address


INSTALL_JAVA = (
    "install a JDK or JRE 17+ (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
)


def require_java(prog: str) -> None:
    """Exit 2 with a one-line message when Spark will find no `java` to start its JVM: the
    one JAVA_HOME names, as spark-class takes it, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            fail(prog, f"Spark needs Java 17+, and JAVA_HOME={home} has no {java}: {INSTALL_JAVA}")
        return
    if shutil.which("java") is None:
        fail(prog, f"Spark needs Java 17+: no java on PATH and no JAVA_HOME: {INSTALL_JAVA}")
