"""`minicoord bench dispatch`: the Python a server spends per request, without sockets.

    minicoord bench dispatch [--api heartbeat,commit,cghb] [--per-turn 20] [--turns 1000]

Members join an embedded server over 127.0.0.1 as `bench lean`'s do; then, on the server's
own loop, `--per-turn` connections whose transports only collect each read one of those
members' requests per turn, the turn ends as the loop would end it (records written, then
answers), `--turns` times over, in each of five passes. It prints the server thread's CPU per
request (the best pass) and checks that every connection's last answer carries no error.

What it leaves out, the event loop's polling and the kernel's TCP, is what a bare uvloop
server also pays; what it keeps is minicoord's own work, so a change on a hot path shows here
without the noise of a loaded host. Under callgrind it counts instructions instead: the
difference between runs of two `--turns`, divided by the extra requests (5 x 200 x 20 below),
is instructions per request (with whatever the server does by the clock meanwhile, timers
and sweeps, which a run that callgrind slows fifty-fold gives more time to):

    valgrind --tool=callgrind python -m minicoord.bench.dispatch_cost --api commit --turns 50
    valgrind --tool=callgrind python -m minicoord.bench.dispatch_cost --api commit --turns 250
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from minicoord.bench.lean import APIS, PARTITIONS, TOPIC, answer_errors, frames_for
from minicoord.bench.pump import Target

PASSES = 5


def measure(api: str, per_turn: int, turns: int) -> tuple[float, dict[str, int]]:
    """Thread CPU µs per request (best of the passes), and the last answers' errors."""
    from minicoord.server.connection import KafkaConnection
    from minicoord.testing.embedded import EmbeddedServer
    from minicoord.testing.transports import CollectingTransport

    configs = {"group.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 60_000}
    server = EmbeddedServer(configs=configs, topics=[(TOPIC, PARTITIONS)])
    # Generous bounds: under callgrind, start-up alone takes tens of seconds.
    server.start(timeout=600)
    try:
        host, port = server.bootstrap.split(":")
        frames = frames_for(api, Target(host, int(port)), per_turn)

        def run() -> tuple[float, dict[str, int]]:
            broker = server.server.broker
            conns = []
            transports = []
            for _ in range(per_turn):
                transport = CollectingTransport()
                conn = KafkaConnection(broker)
                conn.connection_made(transport)  # type: ignore[arg-type]
                conns.append(conn)
                transports.append(transport)
            pairs = list(zip(conns, frames, strict=True))
            best = float("inf")
            for _ in range(PASSES):
                for t in transports:
                    t.writes.clear()
                started = time.thread_time()
                for _ in range(turns):
                    for conn, frame in pairs:
                        conn.data_received(frame)
                    # What the loop's callback does when the turn ends.
                    broker.uncork()
                best = min(best, (time.thread_time() - started) / (turns * per_turn))
            # One request per connection per turn: each write is one framed answer.
            last = [t.writes[-1][4:] for t in transports]
            return best * 1e6, answer_errors(api, last)

        return server.call(run, timeout=3600)
    finally:
        server.stop(timeout=600)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minicoord bench dispatch",
        description="`minicoord bench dispatch`: the Python a server spends per request, on "
        "its own loop, with no sockets in the way.",
    )
    p.add_argument(
        "--api", default=",".join(APIS), help=f"comma-separated, of {','.join(APIS)} (all)"
    )
    p.add_argument("--per-turn", type=int, default=20, help="connections read per loop turn (20)")
    p.add_argument(
        "--turns", type=int, default=1000, help=f"loop turns in each of the {PASSES} passes (1000)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from minicoord.bench.arg_checks import require_at_least

    parser = build_parser()
    args = parser.parse_args(argv)
    apis = [a.strip() for a in args.api.split(",") if a.strip()]
    unknown = [a for a in apis if a not in APIS]
    if unknown:
        parser.error(f"unknown --api {','.join(unknown)}; one of {','.join(APIS)}")
    if not apis:
        parser.error(f"--api names no API; one of {','.join(APIS)}")
    require_at_least(parser, args, ("per_turn", "turns"), 1)
    failed = False
    for api in apis:
        cost, errors = measure(api, args.per_turn, args.turns)
        verdict = "no errors" if not errors else f"ERRORS {errors}"
        failed = failed or bool(errors)
        print(
            f"{api}: {args.per_turn} per turn, {args.turns} turns: {cost:.2f} us of Python per "
            f"request (thread CPU, best of {PASSES}); answers: {verdict}",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
