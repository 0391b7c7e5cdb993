"""The Spark scenarios' command line (`minicoord bench SCENARIO [options]`): the parser, each
scenario's defaults, the options dict the runner takes, and every check made before Spark
starts, so that a wrong argument costs a line, not Spark's half minute."""

from __future__ import annotations

import argparse
import time
from typing import Any

SCENARIOS = (
    "cold-join",
    "join-scaling",
    "rejoin",
    "churn",
    "heartbeat",
    "commit",
    "scale",
    "head-to-head",
    "data",
    "protocols",
)

# Defaults that differ by scenario (None in the parser means "take it from here").
DEFAULTS: dict[str, dict[str, Any]] = {
    "cold-join": {"groups": 10, "members": 10},
    "join-scaling": {"sizes": [10, 100, 1000, 5000]},
    "rejoin": {"members": 100, "rounds": 3},
    "churn": {"groups": 2, "members": 10, "duration_s": 10.0, "heartbeat_interval_ms": 500},
    "heartbeat": {"members": 1000, "duration_s": 5.0},
    "commit": {"members": 100, "duration_s": 5.0},
    "scale": {"steps": [1000, 5000, 10000], "hold_s": 10.0},
    "head-to-head": {"members": 100, "duration_s": 5.0, "compare_rounds": 3},
    "data": {"rates": [10_000], "duration_s": 5.0},
    "protocols": {
        "sizes": [10, 100, 1000],
        "members": 100,
        "group_size": 100,
        "duration_s": 5.0,
        "compare_rounds": 3,
    },
}
COMMON = {
    "groups": 1,
    "members": 10,
    "group_size": 100,
    "duration_s": 5.0,
    "heartbeat_interval_ms": 3000,
    "rounds": 3,
    "hold_s": 10.0,
    "rates": [],
    "compare_rounds": 1,
}
DATA_PARTITIONS = 16
# The minicoord server's group.consumer.heartbeat.interval.ms when not configured.
SERVER_CONSUMER_HEARTBEAT_MS = 500
# protocols: the newcomer's group has this many partitions per member, so that the newcomer's
# share is taken from some members while the others keep everything.
NEWCOMER_PARTITIONS_PER_MEMBER = 10


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas: {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers: {text!r}")
    return values


def _cpus(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CPU numbers, e.g. 0 or 0,1: {text!r}") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected CPU numbers, e.g. 0 or 0,1: {text!r}")
    return values


_BYTE_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "KI": 1024, "MI": 1024**2}
_BYTE_UNITS["GI"] = 1024**3


def _bytes(text: str) -> int:
    """A byte count: 1073741824, 1GiB, 512MiB, 100MB, 64KiB."""
    t = text.strip().upper().removesuffix("B")
    number = t.rstrip("KMGI")
    unit = t[len(number) :]
    try:
        value = int(float(number) * _BYTE_UNITS[unit])
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"expected a byte count like 1GiB: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a byte count like 1GiB: {text!r}")
    return value


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minicoord bench",
        description="Load-test a Kafka group coordinator with simulated members driven by "
        "Spark tasks; results aggregated in Spark.",
        epilog="Without Spark: `minicoord bench lean` (heartbeats, commits and "
        "ConsumerGroupHeartbeats per second against a peer), `minicoord bench dispatch` (the "
        "Python per request, without sockets) and `minicoord bench footprint` (start-up time "
        "and memory against a bare uvloop server and a peer); each has --help.",
    )
    p.add_argument("scenario", choices=SCENARIOS)
    target = p.add_argument_group("target")
    target.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="the server under test; without it the bench starts a minicoord server itself",
    )
    target.add_argument(
        "--server-config",
        action="append",
        default=[],
        type=_pair,
        metavar="KEY=VALUE",
        help="a broker config for the server the bench starts (`minicoord serve --config`), "
        "e.g. log.flush.policy=fsync; repeatable",
    )
    target.add_argument(
        "--server-data-dir",
        help="data dir of the server the bench starts, kept afterwards "
        "(default: see --server-storage)",
    )
    target.add_argument(
        "--server-storage",
        choices=["memory", "log"],
        help="the server the bench starts keeps everything in memory (--in-memory), or "
        "writes its log to a folder under --out removed at the end (default: log for "
        "commit and data, memory otherwise)",
    )
    target.add_argument(
        "--compare",
        action="store_true",
        help="also run against a bare uvloop echo server (the ceiling; "
        "heartbeat scenario) and report minicoord's ratios",
    )
    target.add_argument(
        "--compare-bootstrap",
        metavar="HOST:PORT",
        help="also run against this Kafka-protocol server and report ratios",
    )
    target.add_argument(
        "--compare-pid",
        type=int,
        metavar="PID",
        help="process id of the --compare-bootstrap server when it runs on this host: its "
        "CPU and memory are then read from /proc as minicoord's are",
    )
    target.add_argument(
        "--compare-rounds",
        type=int,
        metavar="R",
        help="run every job R times, the targets taking turns round by round (minicoord, "
        "other, minicoord, ...); summary.json then holds each round's ratios and their "
        "median (head-to-head and protocols: 3, others: 1); protocols alternates the two "
        "protocols' jobs the same way against the one server",
    )
    target.add_argument(
        "--server-cpus",
        type=_cpus,
        metavar="N[,N]",
        help="pin the servers the bench starts to these CPUs (Linux)",
    )
    target.add_argument(
        "--client-cpus",
        type=_cpus,
        metavar="N[,N]",
        help="pin the Spark tasks' Python workers to these CPUs (Linux)",
    )

    load = p.add_argument_group("load")
    load.add_argument("--groups", type=int, help="groups (cold-join: 10, churn: 2)")
    load.add_argument(
        "--members",
        type=int,
        help="members per group (cold-join: 10, churn: 10, rejoin: 100; protocols: the "
        "newcomer's group and the heartbeat group, 100); total members (heartbeat: 1000, "
        "commit and head-to-head: 100)",
    )
    load.add_argument(
        "--join-members",
        type=int,
        default=1000,
        help="head-to-head: the size of the group whose join is timed (1000)",
    )
    load.add_argument(
        "--group-size", type=int, help="members per group in heartbeat, commit, scale (100)"
    )
    load.add_argument(
        "--sizes",
        type=_ints,
        help="group sizes (join-scaling: 10,100,1000,5000; protocols: 10,100,1000)",
    )
    load.add_argument(
        "--steps", type=_ints, help="scale: total members after each wave (1000,5000,10000)"
    )
    load.add_argument("--rounds", type=int, help="rejoin: newcomers, one per round (3)")
    load.add_argument(
        "--duration-s",
        type=float,
        help="length of each timed step (churn: 10, heartbeat and commit: 5)",
    )
    load.add_argument(
        "--rates",
        type=_ints,
        help="heartbeat/commit: also run at these fixed aggregate rates per second, e.g. "
        "5000,10000,20000; data: the produce rates of the end-to-end latency steps (10000)",
    )
    load.add_argument(
        "--no-back-to-back",
        action="store_true",
        help="heartbeat/commit: skip the back-to-back step; data: skip produce and consume",
    )
    load.add_argument("--hold-s", type=float, help="scale: seconds each wave is held (10)")
    load.add_argument(
        "--lifetime-ms", type=float, default=3000, help="churn: mean time a member stays (3000)"
    )
    load.add_argument(
        "--pause-ms",
        type=float,
        default=500,
        help="churn: mean time before a member comes back (500)",
    )
    load.add_argument(
        "--start-spread-ms",
        type=float,
        default=0,
        help="start members evenly over this window instead of all at once",
    )

    data = p.add_argument_group("records (data)")
    data.add_argument(
        "--records",
        type=int,
        default=1_000_000,
        help="records the produce step writes and the consume step reads (1000000)",
    )
    data.add_argument("--record-bytes", type=int, default=1024, help="record value size (1024)")
    data.add_argument(
        "--fill-bytes",
        type=_bytes,
        default=0,
        help="first produce this much (e.g. 1GiB) into a topic of its own, then read the "
        "server's RSS (off)",
    )
    data.add_argument(
        "--producer-config",
        action="append",
        default=[],
        type=_pair,
        metavar="KEY=VALUE",
        help="a librdkafka producer setting over its defaults; repeatable",
    )
    data.add_argument(
        "--consumer-config",
        action="append",
        default=[],
        type=_pair,
        metavar="KEY=VALUE",
        help="a librdkafka consumer setting over its defaults; repeatable",
    )

    member = p.add_argument_group("members")
    member.add_argument(
        "--group-protocol",
        choices=["classic", "consumer"],
        help="the members' group protocol: classic (JoinGroup/SyncGroup/Heartbeat, the leader "
        "assigns) or consumer (KIP-848 ConsumerGroupHeartbeat, the server assigns); every "
        "group scenario takes either (classic); protocols runs both and refuses it",
    )
    member.add_argument(
        "--server-assignor",
        choices=["uniform", "range"],
        help="consumer protocol: the server-side assignor members ask for "
        "(group.remote.assignor; default: the server's first of group.consumer.assignors)",
    )
    member.add_argument("--topic", default="bench", help="the topic members subscribe to (bench)")
    member.add_argument(
        "--partitions",
        type=int,
        help=f"its partitions (default: the largest group size; data: {DATA_PARTITIONS})",
    )
    member.add_argument(
        "--assignor",
        choices=["range", "roundrobin"],
        help="classic members' leader-side assignor (range)",
    )
    member.add_argument("--static", action="store_true", help="static members (group.instance.id)")
    member.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        help="classic members' heartbeat interval (3000; churn: 500; protocols: the "
        "server's group.consumer.heartbeat.interval.ms, so both protocols learn of a "
        "rebalance at the same pace); consumer-protocol members use the server's",
    )
    member.add_argument(
        "--session-timeout-ms", type=int, default=30_000, help="members' session timeout (30000)"
    )
    member.add_argument(
        "--rebalance-timeout-ms",
        type=int,
        default=60_000,
        help="members' rebalance timeout; churn's grace after its duration (60000)",
    )
    member.add_argument(
        "--connections",
        choices=["per-member", "shared"],
        default="per-member",
        help="one connection per member, or shared (per-member)",
    )
    member.add_argument(
        "--members-per-connection", type=int, default=100, help="with --connections shared (100)"
    )
    member.add_argument(
        "--timeout-s",
        type=float,
        default=120,
        help="give up waiting for a group to settle after this (120)",
    )

    spark = p.add_argument_group("spark and output")
    spark.add_argument("--master", help="Spark master (local[*]; under spark-submit: its own)")
    spark.add_argument(
        "--tasks",
        type=int,
        help="Spark tasks (default: local mode's cores; on a cluster, the task slots "
        "it offers once an executor registered); a barrier stage needs this many free slots",
    )
    spark.add_argument(
        "--slots-timeout-s",
        type=float,
        default=30.0,
        help="on a cluster, wait this long for executors offering --tasks slots, then fail (30)",
    )
    spark.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        type=_pair,
        metavar="KEY=VALUE",
        help="extra Spark config; repeatable",
    )
    spark.add_argument("--out", help="output folder (./bench-results/SCENARIO-TIMESTAMP)")
    spark.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed arguments with scenario defaults filled in, as one plain dict."""
    o = dict(vars(args))
    o["group_protocol"] = args.group_protocol or "classic"
    o["assignor"] = args.assignor or "range"
    if args.scenario == "protocols" and o["heartbeat_interval_ms"] is None:
        # Classic members heartbeat as often as the server tells consumer-protocol members
        # to: both learn of a rebalance from their next heartbeat, at the same pace.
        configured = dict(args.server_config).get("group.consumer.heartbeat.interval.ms")
        o["heartbeat_interval_ms"] = int(configured or SERVER_CONSUMER_HEARTBEAT_MS)
    for key, value in {**COMMON, **DEFAULTS[args.scenario]}.items():
        if o.get(key) is None:
            o[key] = value
    o["server_config"] = dict(args.server_config)
    o["producer_config"] = dict(args.producer_config)
    o["consumer_config"] = dict(args.consumer_config)
    o["back_to_back"] = not args.no_back_to_back
    if o["out"] is None:
        o["out"] = f"./bench-results/{args.scenario}-{time.strftime('%Y%m%d-%H%M%S')}"
    o["partitions_given"] = o["partitions"]
    if o["partitions"] is None:
        sizes = {
            "cold-join": [o["members"]],
            "join-scaling": o["sizes"],
            "rejoin": [o["members"] + o["rounds"]],
            "churn": [o["members"]],
            "data": [DATA_PARTITIONS],
            "protocols": o["sizes"],
        }.get(args.scenario, [min(o["group_size"], o["members"])])
        o["partitions"] = max(sizes)
    if args.scenario == "scale":
        o["members"] = max(o["steps"])
    per_member = NEWCOMER_PARTITIONS_PER_MEMBER
    o["newcomer_partitions"] = o["partitions_given"] or per_member * o["members"]
    return o


def check_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace, o: dict[str, Any]
) -> None:
    """Combinations the bench cannot run, or options a protocol would silently ignore:
    refused before anything starts (`args`: what was given, `o`: with defaults)."""
    if args.scenario == "protocols" and args.group_protocol:
        parser.error("protocols runs both group protocols side by side: drop --group-protocol")
    consumer = o["group_protocol"] == "consumer"
    if consumer and args.scenario == "data":
        parser.error(
            "the data scenario's consumers are librdkafka's classic-protocol consumers: "
            "it cannot run with --group-protocol consumer"
        )
    if consumer and o["compare"]:
        parser.error(
            "--compare's echo server answers only classic Heartbeats: it cannot serve "
            "--group-protocol consumer"
        )
    if consumer and args.heartbeat_interval_ms is not None:
        parser.error(
            "consumer-protocol members heartbeat at the interval the server tells them: set "
            "--server-config group.consumer.heartbeat.interval.ms=N, not --heartbeat-interval-ms"
        )
    if consumer and args.assignor:
        parser.error(
            "--assignor is the classic leader's assignor; consumer-protocol groups are "
            "assigned by the server: use --server-assignor"
        )
    if not consumer and args.server_assignor and args.scenario != "protocols":
        parser.error("--server-assignor is for --group-protocol consumer")


# Options that count something (at least 1) and that time something (more than 0), checked
# before anything starts: a zero would divide by zero, plan nothing, or wait forever.
COUNTS = (
    "groups",
    "members",
    "join_members",
    "group_size",
    "rounds",
    "records",
    "members_per_connection",
    "tasks",
    "compare_rounds",
    "compare_pid",
    "partitions",
    "heartbeat_interval_ms",
    "session_timeout_ms",
    "rebalance_timeout_ms",
)
DURATIONS = ("duration_s", "hold_s", "lifetime_ms", "timeout_s")
# These may be 0: no pause, no spread, no wait for executors, empty record values.
NOT_NEGATIVE = ("pause_ms", "start_spread_ms", "slots_timeout_s", "record_bytes")


def check_values(parser: argparse.ArgumentParser, o: dict[str, Any]) -> None:
    """Numbers and addresses that cannot work, refused with parser.error before anything
    starts (`o`: the options with defaults)."""
    from minicoord.bench.arg_checks import (
        address_arg,
        require_at_least,
        require_positive,
        require_process,
    )

    require_at_least(parser, o, COUNTS, 1)
    require_positive(parser, o, DURATIONS)
    require_at_least(parser, o, NOT_NEGATIVE, 0)
    address_arg(parser, "--bootstrap", o["bootstrap"])
    address_arg(parser, "--compare-bootstrap", o["compare_bootstrap"])
    if o["compare_pid"] is not None:
        require_process(parser, o["compare_pid"])
    if not o["bootstrap"] and o["server_config"]:
        # The server the bench would start refuses these at once, but only once Spark is up.
        from minicoord.server.config import Config, ConfigError

        try:
            Config.from_pairs(list(o["server_config"].items()))
        except (ConfigError, ValueError) as exc:
            parser.error(f"--server-config: {exc}")


def check_out(parser: argparse.ArgumentParser, o: dict[str, Any]) -> None:
    """--out must be new or empty: every job appends its rows to `raw.parquet` there, so an
    earlier run's rows would be read as this run's."""
    from pathlib import Path

    out = Path(o["out"])
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        parser.error(f"--out {out} already holds something (a run?): give a new or empty folder")


def check_reachable(parser: argparse.ArgumentParser, o: dict[str, Any]) -> None:
    """A plain TCP connect to each given server, before Spark takes its half minute to
    start: nothing listening there is a one-line message and exit status 2."""
    from minicoord.bench.arg_checks import parse_address, require_reachable

    for option, key in (("--bootstrap", "bootstrap"), ("--compare-bootstrap", "compare_bootstrap")):
        if o[key]:
            require_reachable(parser.prog, option, parse_address(o[key]))
