"""The `minicoord` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from minicoord.server.app import Server, serve
from minicoord.server.config import Config, ConfigError, parse_setting


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
    return name, partitions


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minicoord", description="A Kafka consumer-group coordinator."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the coordinator")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    s.add_argument("--port", type=int, default=9092, help="port to listen on; 0 picks a free one")
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
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level of the lines written to stderr (INFO)",
    )
    return parser


def _run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = Config.from_pairs([parse_setting(s) for s in args.config])
        server = Server(config, args.host, args.port, args.topic)
    except (ConfigError, ValueError) as exc:
        print(f"minicoord: {exc}", file=sys.stderr)
        return 2
    try:
        _run(serve(server))
    except OSError as exc:
        print(f"minicoord: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
