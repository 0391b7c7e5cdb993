"""`minicoord bench SCENARIO [options]`: the PySpark load generator's command line.

Also a spark-submit application: `spark-submit --master spark://HOST:7077 $(python -c
'import minicoord.bench.cli as m; print(m.__file__)') heartbeat --bootstrap HOST:PORT`.
pyspark is imported only when a benchmark runs, so `minicoord serve` never loads it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any


def _raise_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def exit_on_stop_signals() -> None:
    """SIGTERM and SIGHUP as SystemExit, for a process that is a bench and nothing else.

    Their default action ends the process where it stands, leaving every server a scenario
    started (lean, footprint, the Spark runner's) running with no one to stop it; as an
    exception, the `finally` that stops each one runs."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_exit)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["lean"]:
        # Not a Spark scenario: raw frames from plain processes (bench/lean.py).
        from minicoord.bench.lean import main as lean_main

        return lean_main(args_in[1:])
    if args_in[:1] == ["dispatch"]:
        # Nor this: the Python per request, on the server's own loop, without sockets.
        from minicoord.bench.dispatch_cost import main as dispatch_main

        return dispatch_main(args_in[1:])
    if args_in[:1] == ["footprint"]:
        # Not a Spark scenario either: start-up and memory against a bare uvloop server.
        from minicoord.bench.footprint import main as footprint_main

        return footprint_main(args_in[1:])
    from minicoord.bench.console import Console, under_spark_submit
    from minicoord.bench.scenario_args import (
        build_parser,
        check_options,
        check_out,
        check_reachable,
        check_values,
        options,
    )

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        o = options(args)
    except ValueError as exc:  # a --server-config value options() reads, not a number
        parser.error(f"--server-config: {exc}")
    check_options(parser, args, o)
    check_values(parser, o)
    check_out(parser, o)
    check_reachable(parser, o)
    if not under_spark_submit():  # under spark-submit the JVM is running already
        from minicoord.bench.arg_checks import require_java

        require_java(parser.prog)
    from minicoord.bench.cluster_checks import ClusterNotReady
    from minicoord.bench.runner import run

    console = Console()
    try:
        summary = run(o, console)
    except ClusterNotReady as exc:
        console.line(str(exc))
        return 2
    from minicoord.bench.load_stats import step_errors_line

    errors = step_errors_line(summary["results"].get("steps", []))
    if errors:
        console.line(errors)
    print(f"results in {o['out']} (summary.json, results.md, raw.parquet, plots)")
    return exit_status(summary)


def exit_status(summary: dict[str, Any]) -> int:
    """1 when a check of the run failed, else 0."""
    results = summary["results"]
    failed = [
        g
        for g in results.get("groups", [])
        if g["assignment_violations"] or g["groups_with_failures"]
    ]
    # Records lost, failed or read twice fail a data run as a broken assignment fails a join;
    # offsets not read back as acknowledged (or none acknowledged: nothing verified) likewise.
    lost = results.get("records_verified") is False
    unverified = results.get("offsets_verified") is False
    return 1 if failed or lost or unverified else 0


if __name__ == "__main__":
    sys.exit(main())
