"""The `minicoord` command line."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import sys
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

from minicoord.server import lazy_kafka
from minicoord.server.config import Config, ConfigError, parse_setting, with_authorizer

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

# What reading the command line loads that serving never uses again (see forget_parser).
_PARSER_MODULES = ("minicoord.server.arguments", "argparse", "gettext")


def forget_parser() -> None:
    """Let the command line's parser go, in a process that has read its arguments.

    Only for a process that is `minicoord serve` and nothing else (the console script): a
    host that imported argparse for itself would be left with two copies of it. The caller
    must hold no argparse.Namespace (its class keeps argparse alive). The collection frees
    the modules' function/globals cycles now, so the server's modules loaded next reuse
    their memory.
    """
    import minicoord.server

    minicoord.server.__dict__.pop("arguments", None)
    for name in _PARSER_MODULES:
        sys.modules.pop(name, None)
    gc.collect()


def _parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The arguments, and what follows `bench` (its own parser reads that)."""
    from minicoord.server.arguments import build_parser

    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args, rest


def _log_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from minicoord.storage import tools

    data_dir = Path(args.dir)
    if not data_dir.is_dir():
        print(f"minicoord: {data_dir} is not a directory", file=sys.stderr)
        return 2
    if args.log_command == "dump":
        if not tools.selected(data_dir, args.topic, args.partition):
            which = ", ".join(
                f"{what} {value}"
                for what, value in (("topic", args.topic), ("partition", args.partition))
                if value is not None
            )
            where = f" of {which}" if which else ""
            print(f"minicoord: {data_dir} holds no log{where}", file=sys.stderr)
            return 2
        try:
            _, damaged = tools.dump(data_dir, args.partition, topic=args.topic)
        except BrokenPipeError:
            # The reader (`| head`) has what it wanted: stop quietly, and keep the
            # interpreter's last flush from failing on the closed pipe too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
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


def _compacted_topics(data_dir: Path, config: Config) -> dict[str, tuple[int, int, int]]:
    """The topics whose cleanup.policy includes compact, from the cluster metadata log, each
    with its delete.retention.ms, min.compaction.lag.ms and segment.bytes (`__transaction_state`
    among them once it exists), and `__consumer_offsets` with the tombstone retention the
    server's cleaner uses, set at runtime or at start (no lag; the offsets settings' size)."""
    from minicoord.server.cluster_metadata import replay_metadata
    from minicoord.server.topics import METADATA_TOPIC, OFFSETS_TOPIC, TopicRegistry
    from minicoord.storage.log import log_dir
    from minicoord.storage.partition_log import PartitionLog

    if not log_dir(data_dir, METADATA_TOPIC, 0).is_dir():
        return {}
    plog = PartitionLog(log_dir(data_dir, METADATA_TOPIC, 0), METADATA_TOPIC, 1 << 30)
    plog.open()
    registry = TopicRegistry(config)
    replay_metadata(plog, registry)
    plog.close()
    wanted = {}
    for t in registry.all():
        cfg = registry.config_of(t)
        if t.name == OFFSETS_TOPIC:
            wanted[t.name] = (cfg.delete_retention_ms, 0, config.offsets_topic_segment_bytes)
        elif cfg.compact:
            wanted[t.name] = (cfg.delete_retention_ms, cfg.min_compaction_lag_ms, cfg.segment_bytes)
    return wanted


def _run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]


def _listen_early(args: SimpleNamespace, config: Config) -> list[socket.socket] | None:
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
        print(f"minicoord: cannot listen: {exc.strerror or exc}", file=sys.stderr)
        return []
    early_listen.catch_stop_signals()
    print(f"minicoord listening on {describe(listeners, early_listen.bound(sockets))}", flush=True)
    return sockets


def main(argv: Sequence[str] | None = None, *, whole_process: bool = False) -> int:
    """Run one command. `whole_process`: this call is all the process will ever do (the
    console script, `python -m`), so a server may let the parser go (forget_parser)."""
    # Before anything imports kafka-python: the server needs its codecs, not its clients.
    lazy_kafka.defer_client_package()
    lazy_kafka.defer_codec_packages()
    args, rest = _parse(argv)
    if args.command == "bench":
        # Imported here: pyspark and matplotlib load only for benchmarks, never for serve.
        from minicoord.bench.cli import exit_on_stop_signals
        from minicoord.bench.cli import main as bench_main

        if whole_process:  # not when a test calls main(): its process keeps its handlers
            exit_on_stop_signals()
        return bench_main(rest)
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
    options = SimpleNamespace(**vars(args))
    del args  # serving from here: a Namespace would keep argparse alive (forget_parser)
    try:
        pairs = [parse_setting(s) for s in options.config]
        config = Config.from_pairs(with_authorizer(pairs, options.acl, options.super_user))
    except (ConfigError, ValueError) as exc:
        print(f"minicoord: {exc}", file=sys.stderr)
        return 2
    sockets = _listen_early(options, config)
    if sockets == []:
        return 1
    if whole_process:
        forget_parser()  # after the ready line, before the server's modules load
    from minicoord.server.app import Server, serve

    try:
        data_dir = None if options.in_memory else options.data_dir
        server = Server(
            config,
            options.host,
            options.port,
            options.topic,
            data_dir=data_dir,
            metrics_port=options.metrics_port,
            control_port=options.control_port,
            acls=options.acl,
            users=options.user,
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
        if exc.filename is not None:  # the data directory, not an address
            print(f"minicoord: cannot use {exc.filename}: {exc.strerror}", file=sys.stderr)
            return 2
        if isinstance(exc, socket.gaierror) or "attempting to bind" in str(exc):
            # A bind error (early_listen's, or the loop's, in the same words) names the
            # address (--port's, or an HTTP port's); a host that does not resolve, its name.
            print(f"minicoord: cannot listen: {exc.strerror or exc}", file=sys.stderr)
        else:
            print(f"minicoord: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def run() -> int:
    """The `minicoord` console script."""
    return main(whole_process=True)


if __name__ == "__main__":
    sys.exit(run())
