"""The `minicoord` command line."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from minicoord.server import lazy_kafka
from minicoord.server.config import Config, ConfigError, parse_setting, with_authorizer

if TYPE_CHECKING:
    from pathlib import Path


def _topic(text: str) -> tuple[str, int]:
    name, sep, count = text.rpartition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS, got {text!r}")
    try:
        partitions = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"partition count {count!r} is not a number") from None
    if partitions < 1:
        raise argparse.ArgumentTypeError("a topic needs at least one partition")
    from minicoord.server.topics import topic_name_error

    reason = topic_name_error(name)
    if reason is not None:
        raise argparse.ArgumentTypeError(reason)
    return name, partitions


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width.

    Left to find it, argparse imports shutil, which loads the bz2 and lzma libraries: half a
    megabyte of every `serve` process, for help it never prints.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", _terminal_columns() - 2)
        super().__init__(prog, **kwargs)


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
        type=int,
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
        help="where the offsets log lives (./minicoord-data)",
    )
    store.add_argument(
        "--in-memory",
        action="store_true",
        help="keep commits and groups in memory only: nothing survives a restart",
    )
    s.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0 picks a port)",
    )
    s.add_argument(
        "--control-port",
        type=int,
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
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="per request (10)"
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


def _log_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from minicoord.storage import tools

    data_dir = Path(args.dir)
    if not data_dir.is_dir():
        print(f"minicoord: {data_dir} is not a directory", file=sys.stderr)
        return 2
    if args.log_command == "dump":
        _, damaged = tools.dump(data_dir, args.partition, topic=args.topic)
        # Sound records are printed either way; damage makes the exit status say so.
        return 1 if damaged else 0
    if args.log_command == "verify":
        problems = tools.verify(data_dir)
        if problems:
            print(f"{problems} problem(s) found", file=sys.stderr)
            return 1
        return 0
    config = Config.from_pairs([parse_setting(s) for s in args.config])
    for r in tools.compact(
        data_dir,
        config.log_cleaner_delete_retention_ms,
        config.offsets_topic_segment_bytes,
        _compacted_topics(data_dir, config),
    ):
        print(
            f"{r.name}: {r.records_before} -> {r.records_after} records, "
            f"{r.bytes_before} -> {r.bytes_after} bytes"
        )
    return 0


def _compacted_topics(data_dir: Path, config: Config) -> set[str]:
    """The topics whose cleanup.policy includes compact, from the cluster metadata log."""
    from minicoord.server.topics import METADATA_TOPIC, TopicRegistry, replay_metadata
    from minicoord.storage.log import log_dir
    from minicoord.storage.partition_log import PartitionLog

    if not log_dir(data_dir, METADATA_TOPIC, 0).is_dir():
        return set()
    plog = PartitionLog(log_dir(data_dir, METADATA_TOPIC, 0), METADATA_TOPIC, 1 << 30)
    plog.open()
    registry = TopicRegistry(config)
    replay_metadata(plog, registry)
    plog.close()
    return {t.name for t in registry.user_topics() if registry.config_of(t).compact}


def _run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]


def _listen_early(args: argparse.Namespace, config: Config) -> list[socket.socket] | None:
    """The bound sockets of a server that binds before loading (server/early_listen.py),
    with its ready line printed; None for one that loads first; [] if binding failed."""
    from minicoord.server import early_listen
    from minicoord.server.security.listeners import describe, listeners_of

    try:
        listeners = listeners_of(config, args.host, args.port)
    except ConfigError:
        return None  # the Server reports it, as for any other server
    risky = bool(
        args.acl or args.super_user or args.user or args.metrics_port is not None
        or args.control_port is not None
    )  # fmt: skip
    if not early_listen.can_listen_early(listeners, args.in_memory, risky):
        return None
    try:
        sockets = early_listen.bind(listeners)
    except OSError as exc:
        print(f"minicoord: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return []
    early_listen.catch_stop_signals()
    print(f"minicoord listening on {describe(listeners, early_listen.bound(sockets))}", flush=True)
    return sockets


def main(argv: Sequence[str] | None = None) -> int:
    # Before anything imports kafka-python: the server needs its codecs, not its clients.
    lazy_kafka.defer_client_package()
    args, rest = build_parser().parse_known_args(argv)
    if args.command == "bench":
        # Imported here: pyspark and matplotlib load only for benchmarks, never for serve.
        from minicoord.bench.cli import main as bench_main

        return bench_main(rest)
    if rest:
        build_parser().error(f"unrecognized arguments: {' '.join(rest)}")
    from minicoord.server.logfmt import configure

    configure(getattr(args, "log_level", "INFO"), getattr(args, "log_format", "text"))
    if args.command == "ctl":
        from minicoord.server.ctl import run as ctl_run

        return ctl_run(args)
    if args.command == "certs":
        from minicoord.server.security.certs import write_certs

        files = write_certs(args.dir)
        print(
            f"wrote CA {files.ca}, server key store {files.server_keystore}, client "
            f"{files.client_cert} / {files.client_key} in {files.dir}"
        )
        return 0
    if args.command == "doctor":
        from minicoord.clients.doctor import run as doctor_run

        return doctor_run(args)
    from minicoord.storage.log import StoreError

    if args.command == "log":
        try:
            return _log_command(args)
        except (ConfigError, StoreError) as exc:
            print(f"minicoord: {exc}", file=sys.stderr)
            return 2
    try:
        pairs = [parse_setting(s) for s in args.config]
        config = Config.from_pairs(with_authorizer(pairs, args.acl, args.super_user))
    except (ConfigError, ValueError) as exc:
        print(f"minicoord: {exc}", file=sys.stderr)
        return 2
    sockets = _listen_early(args, config)
    if sockets == []:
        return 1
    from minicoord.server.app import Server, serve

    try:
        data_dir = None if args.in_memory else args.data_dir
        server = Server(
            config,
            args.host,
            args.port,
            args.topic,
            data_dir=data_dir,
            metrics_port=args.metrics_port,
            control_port=args.control_port,
            acls=args.acl,
            users=args.user,
            sockets=sockets,
        )
    except (ConfigError, ValueError) as exc:
        print(f"minicoord: {exc}", file=sys.stderr)
        return 2
    try:
        _run(serve(server, announced=sockets is not None))
    except StoreError as exc:
        print(f"minicoord: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"minicoord: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
