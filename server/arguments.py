"""The `minicoord` command line's parser.

Its own module so that `minicoord serve` can let it go once the arguments are read
(cli.forget_parser): argparse and gettext are about 0.35 MB of a serving process that never
parses again, and the server's modules, loaded after, reuse the space.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def _topic(text: str) -> tuple[str, int]:
    from minicoord.server.topics import parse_topic_spec

    try:
        return parse_topic_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width.

    Left to find it, argparse imports shutil, which loads the bz2 and lzma libraries: half a
    megabyte of every `serve` process, for help it never prints.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", _terminal_columns() - 2)
        super().__init__(prog, **kwargs)


def _port(text: str) -> int:
    # Checked here, for the error a flag gets (the server checks again, for embedders).
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def _seconds(text: str) -> float:
    """A positive, finite duration (a timeout of 0 would fail every request)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition(":")
    if not sep or not name or not password:
        # Never echo the value: it holds a password.
        raise argparse.ArgumentTypeError("takes NAME:PASSWORD")
    return name, password


def _terminal_columns() -> int:
    # shutil.get_terminal_size's rule: $COLUMNS, else the terminal's width, else 80.
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser with the formatter above; its subcommands' parsers are of this class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="minicoord", description="A Kafka consumer-group coordinator.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the coordinator")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    s.add_argument(
        "--port",
        type=_port,
        default=9092,
        help="port to listen on; 0 picks a free one (the listeners config, when given, "
        "replaces --host and --port)",
    )
    s.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka broker config, e.g. group.min.session.timeout.ms=1000 (repeatable)",
    )
    s.add_argument(
        "--topic",
        action="append",
        default=[],
        type=_topic,
        metavar="NAME:PARTITIONS",
        help="create a topic at start (repeatable)",
    )
    s.add_argument(
        "--acl",
        action="append",
        default=[],
        metavar="SPEC",
        help="an ACL at start, e.g. 'allow User:alice Read group:orders' (repeatable; "
        "switches the authorizer on)",
    )
    s.add_argument(
        "--super-user",
        action="append",
        default=[],
        metavar="PRINCIPAL",
        help="a principal allowed everything, e.g. User:admin (repeatable; switches the "
        "authorizer on)",
    )
    s.add_argument(
        "--user",
        action="append",
        default=[],
        type=_user,
        metavar="NAME:PASSWORD",
        help="a SASL user for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (repeatable)",
    )
    store = s.add_mutually_exclusive_group()
    store.add_argument(
        "--data-dir",
        default="./minicoord-data",
        metavar="DIR",
        help="where topics, __consumer_offsets and the cluster metadata live (./minicoord-data)",
    )
    store.add_argument(
        "--in-memory",
        action="store_true",
        help="keep messages, commits, groups and topics in memory only: nothing survives a restart",
    )
    s.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0 picks a port)",
    )
    s.add_argument(
        "--control-port",
        type=_port,
        metavar="PORT",
        help="serve the control API of `minicoord ctl` on 127.0.0.1:PORT (0 picks a port)",
    )
    s.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level of the lines written to stderr (INFO); DEBUG adds the request log",
    )
    s.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines, or one JSON object per line (text)",
    )

    certs = sub.add_parser(
        "certs", help="write a throwaway CA, server and client certificates for TLS tests"
    )
    certs.add_argument("dir", help="where to write the PEM files")

    ctl = sub.add_parser(
        "ctl", help="inspect a running server's groups, inject faults, set its log level"
    )
    ctl.add_argument(
        "--control", required=True, metavar="HOST:PORT", help="the server's --control-port"
    )
    ctl.add_argument("--json", action="store_true", help="print the server's answer as JSON")
    actions = ctl.add_subparsers(dest="action", required=True)
    actions.add_parser("groups", help="every group: type, state, members, generation, lag")
    a = actions.add_parser(
        "describe", help="a group's members, assignments, committed offsets and lag"
    )
    a.add_argument("group")
    a = actions.add_parser(
        "rebalance",
        help="force a rebalance of a group (consumer groups: a new epoch and target assignment)",
    )
    a.add_argument("group")
    a = actions.add_parser("expire", help="expire (fence) a member now, as a session timeout would")
    a.add_argument("group")
    a.add_argument("member")
    a = actions.add_parser("fail", help="make the next N requests of an API fail")
    a.add_argument("api", help="Kafka's API name, e.g. Heartbeat, OffsetCommit")
    a.add_argument("error", help="error name or code, e.g. REBALANCE_IN_PROGRESS")
    a.add_argument("--count", type=int, default=1)
    a.add_argument("--group", help="only requests about this group")
    a.add_argument("--client", help="only requests from this client id")
    a = actions.add_parser(
        "cut", help="close the connection of the next N requests of an API instead of answering"
    )
    a.add_argument("api")
    a.add_argument("--count", type=int, default=1)
    a.add_argument(
        "--before", action="store_true", help="before the request takes effect (default: after)"
    )
    a = actions.add_parser("latency", help="delay an API's responses")
    a.add_argument("api")
    a.add_argument("ms", type=int)
    a.add_argument("--duration-ms", type=int, help="for this long (default: until cleared)")
    for name, what in (("moved", "NOT_COORDINATOR"), ("loading", "COORDINATOR_LOAD_IN_PROGRESS")):
        a = actions.add_parser(name, help=f"answer groups {what} for a while")
        a.add_argument("duration_ms", type=int)
        a.add_argument("--group", help="only this group's partition (default: all)")
    actions.add_parser("clear", help="drop every injected fault")
    a = actions.add_parser("log-level", help="set a log level of the running server")
    a.add_argument("level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper)
    a.add_argument(
        "--logger",
        default="minicoord",
        help="minicoord (all, the default) or one logger, e.g. minicoord.requests",
    )

    doctor = sub.add_parser(
        "doctor",
        help="connect as a client would: what a server advertises, and whether a client "
        "configuration can work against it",
    )
    doctor.add_argument("bootstrap", metavar="HOST:PORT", help="a bootstrap server")
    doctor.add_argument(
        "-X",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client config to check, as librdkafka/kcat name it, e.g. "
        "group.protocol=consumer, security.protocol=SASL_SSL (repeatable)",
    )
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    doctor.add_argument(
        "--timeout", type=_seconds, default=10.0, metavar="SECONDS", help="per request (10)"
    )

    logcmd = sub.add_parser("log", help="inspect or maintain a data directory (server stopped)")
    logsub = logcmd.add_subparsers(dest="log_command", required=True)
    d = logsub.add_parser("dump", help="print each record decoded")
    d.add_argument("dir", help="the data directory")
    d.add_argument("--topic", help="only this topic (e.g. __consumer_offsets)")
    d.add_argument("--partition", type=int, help="only this partition number")
    v = logsub.add_parser("verify", help="check every CRC; non-zero exit on damage")
    v.add_argument("dir", help="the data directory")
    c = logsub.add_parser(
        "compact", help="run the cleaner over __consumer_offsets and compacted topics"
    )
    c.add_argument("dir", help="the data directory")
    c.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker configs that matter here: offsets.topic.num.partitions, "
        "log.cleaner.delete.retention.ms, offsets.topic.segment.bytes",
    )
    # Its own parser (minicoord.bench.cli) takes every argument after the word `bench`.
    sub.add_parser("bench", add_help=False, help="run a load benchmark (PySpark)")
    return parser
