"""The report of `minicoord bench protocols`: classic vs consumer protocol, side by side.

Every figure is aggregated in Spark from the raw rows (per step, gauge and task), then the
rounds of each protocol are reduced to their median here, with the lowest and highest:
- settle: first JoinGroup / ConsumerGroupHeartbeat of any member until the last member is
  settled in a group of that size (group_stats' time to Stable of the one group per step);
- newcomer: per old member, time without its unaffected partitions and time owning nothing;
  the newcomer's time to own its share, also in heartbeat intervals; until all resettled;
- heartbeat: Heartbeats/s vs ConsumerGroupHeartbeats/s back to back (load_stats.rate_steps);
- cpu: every timed window's client CPU per task, the server's CPU and the machine's busy
  cores, to tell whether the load generator set the pace;
- claims: the three figures issue 9 asks of the consumer protocol, checked (four checks:
  the newcomer's figure gives two).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from minicoord.bench.load_stats import rate_steps
from minicoord.bench.operation_stats import rounded
from minicoord.bench.task_run import split_round

PROTOCOLS = ("classic", "consumer")
HEARTBEAT_OPS = {"classic": "Heartbeat", "consumer": "ConsumerGroupHeartbeat"}
NEWCOMER_GAUGES = (
    "without_kept_ms",
    "owned_nothing_ms",
    "kept_partitions",
    "gave_up_partitions",
    "gained_partitions",
    "heartbeat_interval_ms",
)
# A gap this short is a timer's resolution, not a member without its partitions.
GAP_EPSILON_MS = 0.001


def _split(step: str) -> tuple[str, str, int]:
    """("consumer", "size=100", 2) from "consumer size=100 #2"."""
    base, round_ = split_round(step)
    protocol, _, rest = base.partition(" ")
    return protocol, rest, round_


def _spread(values: list[float]) -> dict[str, Any]:
    values = sorted(v for v in values if v is not None)
    if not values:
        return {"median": None, "min": None, "max": None}
    return {
        "median": rounded(float(statistics.median(values))),
        "min": rounded(values[0]),
        "max": rounded(values[-1]),
    }


def _ratio(a: Any, b: Any) -> float | None:
    return rounded(a / b, 3) if a is not None and b else None


def _gauges(df: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (step, gauge), over the members' rows: count, how many above zero, p50, p99, max,
    sum; and over the tasks' rows: cores per task (value / its window)."""
    from pyspark.sql import functions as F

    window = F.col("end") - F.col("start")
    rows = (
        df.filter((F.col("kind") == "gauge") & (F.col("target") == "minicoord"))
        .withColumn("cores", F.when(window > 0, F.col("value") / window))
        .groupBy("step", "op")
        .agg(
            F.count("*").alias("n"),
            F.sum(F.when(F.col("value") > GAP_EPSILON_MS, 1).otherwise(0)).alias("positive"),
            F.percentile_approx("value", F.array(F.lit(0.5), F.lit(0.99)), 10_000).alias("q"),
            F.max("value").alias("max"),
            F.sum("value").alias("sum"),
            F.sort_array(F.collect_list(F.struct("task", "cores"))).alias("by_task"),
        )
        .collect()
    )
    return {(r["step"], r["op"]): r.asDict(recursive=True) for r in rows}


def _phases(df: Any, op: str) -> dict[str, dict[str, Any]]:
    """Per step: the longest successful `op` phase, its value, and how many failed."""
    from pyspark.sql import functions as F

    rows = (
        df.filter((F.col("kind") == "phase") & (F.col("op") == op))
        .groupBy("step")
        .agg(
            F.max(F.when(F.col("error") == 0, F.col("latency_ms"))).alias("max_ms"),
            F.max("value").alias("value"),
            F.sum(F.when(F.col("error") != 0, 1).otherwise(0)).alias("failed"),
            F.count("*").alias("n"),
        )
        .collect()
    )
    return {r["step"]: r.asDict() for r in rows}


def settle_table(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group size: each protocol's time to a settled group (median of its rounds, with
    min and max), the per-round ratios consumer / classic and their median."""
    times: dict[tuple[str, int, int], float] = {}
    checks: dict[tuple[str, int], int] = {}
    for g in groups:
        protocol, rest, round_ = _split(g["step"])
        if protocol not in PROTOCOLS or not rest.startswith("size="):
            continue
        size = int(rest.split("=", 1)[1])
        if g["time_to_stable_max_ms"] is not None and not g["groups_with_failures"]:
            times[(protocol, size, round_)] = g["time_to_stable_max_ms"]
        checks[(protocol, size)] = checks.get((protocol, size), 0) + g["assignment_violations"]
    out = []
    for size in sorted({s for _, s, _ in times}):
        rounds = sorted({r for _, s, r in times if s == size})
        entry: dict[str, Any] = {"group_size": size, "rounds": len(rounds)}
        for protocol in PROTOCOLS:
            spread = _spread([times.get((protocol, size, r)) for r in rounds])  # type: ignore[misc]
            entry[f"{protocol}_ms"] = spread["median"]
            entry[f"{protocol}_min_ms"] = spread["min"]
            entry[f"{protocol}_max_ms"] = spread["max"]
            entry[f"{protocol}_assignment_violations"] = checks.get((protocol, size), 0)
        ratios = [
            _ratio(times.get(("consumer", size, r)), times.get(("classic", size, r)))
            for r in rounds
        ]
        entry["consumer_over_classic_by_round"] = ratios
        entry["consumer_over_classic"] = _spread([r for r in ratios if r is not None])["median"]
        out.append(entry)
    return out


def newcomer_table(df: Any, gauges: dict[tuple[str, str], dict[str, Any]]) -> list[dict]:
    """Per protocol and round, then per protocol the median over rounds."""
    shares = _phases(df, "newcomer_share")
    resettled = _phases(df, "resettled")
    rounds: list[dict[str, Any]] = []
    for step in sorted({s for s, op in gauges if op in NEWCOMER_GAUGES}):
        protocol, rest, round_ = _split(step)
        if rest != "newcomer":
            continue

        def g(op: str, field: str, step: str = step) -> Any:
            return (gauges.get((step, op)) or {}).get(field)

        share = shares.get(step, {})
        interval = g("heartbeat_interval_ms", "max")
        q_gap = g("without_kept_ms", "q") or [None, None]
        q_empty = g("owned_nothing_ms", "q") or [None, None]
        rounds.append(
            {
                "protocol": protocol,
                "round": round_,
                "old_members": g("kept_partitions", "n"),
                "members_that_kept_partitions": g("without_kept_ms", "n"),
                "members_ever_without_kept": g("without_kept_ms", "positive"),
                "without_kept_p50_ms": rounded(q_gap[0]),
                "without_kept_max_ms": rounded(g("without_kept_ms", "max")),
                "members_that_owned_nothing": g("owned_nothing_ms", "positive"),
                "owned_nothing_p50_ms": rounded(q_empty[0]),
                "owned_nothing_max_ms": rounded(g("owned_nothing_ms", "max")),
                "members_that_gave_up_partitions": g("gave_up_partitions", "positive"),
                "partitions_moved": g("gave_up_partitions", "sum"),
                "newcomer_share": share.get("value"),
                "newcomer_share_ms": rounded(share.get("max_ms")),
                "heartbeat_interval_ms": interval,
                "newcomer_share_intervals": rounded(
                    share["max_ms"] / interval if share.get("max_ms") and interval else None, 2
                ),
                "all_resettled_ms": rounded(resettled.get(step, {}).get("max_ms")),
                "not_resettled": resettled.get(step, {}).get("failed"),
            }
        )
    medians = []
    for protocol in PROTOCOLS:
        mine = [r for r in rounds if r["protocol"] == protocol]
        if not mine:
            continue
        entry: dict[str, Any] = {"protocol": protocol, "round": "median", "rounds": len(mine)}
        for key in mine[0]:
            if key in ("protocol", "round"):
                continue
            values = [r[key] for r in mine if isinstance(r[key], int | float)]
            entry[key] = _spread(values)["median"]
        # Stop-the-world is about the worst round, not the typical one.
        entry["without_kept_max_ms"] = _spread([r["without_kept_max_ms"] for r in mine])["max"]
        entry["newcomer_share_intervals_max"] = _spread(
            [r["newcomer_share_intervals"] for r in mine]
        )["max"]
        medians.append(entry)
    return rounds + medians


def heartbeat_table(df: Any, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = rate_steps(df, ops, "Heartbeat") + rate_steps(df, ops, "ConsumerGroupHeartbeat")
    steps = [s for s in steps if _split(s["step"])[1] == "heartbeat"]
    out = []
    by: dict[tuple[str, int], dict[str, Any]] = {}
    for s in steps:
        protocol, _, round_ = _split(s["step"])
        by[(protocol, round_)] = s
        out.append({"protocol": protocol, "round": round_, **s})
    rounds = sorted({r for _, r in by})
    ratios = [
        _ratio(
            (by.get(("consumer", r)) or {}).get("achieved_per_s"),
            (by.get(("classic", r)) or {}).get("achieved_per_s"),
        )
        for r in rounds
    ]
    summary: dict[str, Any] = {"protocol": "both", "round": "median"}
    for protocol in PROTOCOLS:
        rates = [(by.get((protocol, r)) or {}).get("achieved_per_s") for r in rounds]
        summary[f"{HEARTBEAT_OPS[protocol]}_per_s"] = _spread(rates)["median"]  # type: ignore[arg-type]
    summary["consumer_over_classic_by_round"] = ratios
    summary["consumer_over_classic"] = _spread([r for r in ratios if r is not None])["median"]
    return [*out, summary]


def cpu_table(gauges: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Every timed window: client CPU of each task, the server's CPU, the machine's busy
    cores (of os.cpu_count() on the host of task 0)."""
    out = []
    for step in sorted({s for s, op in gauges if op == "client_cpu_s"}, key=_split):
        client = gauges[(step, "client_cpu_s")]["by_task"]
        server = gauges.get((step, "server_cpu_s"))
        host = gauges.get((step, "host_busy_s"))
        polls = gauges.get((step, "describe_polls"))
        out.append(
            {
                "step": step,
                "client_cpu_cores_by_task": [rounded(t["cores"], 2) for t in client],
                "server_cpu_cores": rounded(server["by_task"][0]["cores"], 2) if server else None,
                "host_busy_cores": rounded(host["by_task"][0]["cores"], 2) if host else None,
                "describe_polls": int(polls["sum"]) if polls else 0,
            }
        )
    return out


def claims(
    settle: list[dict[str, Any]], newcomer: list[dict[str, Any]], beats: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Issue 9's figures for the consumer protocol, each with what was measured."""
    out = []
    largest = max(settle, key=lambda e: e["group_size"], default=None)
    if largest is not None:
        c, k = largest["consumer_ms"], largest["classic_ms"]
        out.append(
            {
                "claim": f"a {largest['group_size']}-member consumer group settles no slower "
                "than a classic one (medians)",
                "measured": f"consumer {c} ms, classic {k} ms",
                "met": c is not None and k is not None and c <= k,
            }
        )
    med = {r["protocol"]: r for r in newcomer if r["round"] == "median"}
    if "consumer" in med:
        m = med["consumer"]
        out.append(
            {
                "claim": "a newcomer leaves every old member holding its unaffected partitions "
                "throughout (every round)",
                "measured": f"longest gap {m['without_kept_max_ms']} ms",
                "met": m["without_kept_max_ms"] == 0,
            }
        )
        out.append(
            {
                "claim": "the newcomer owns its share within 2 heartbeat intervals (every round)",
                "measured": f"at most {m['newcomer_share_intervals_max']} intervals",
                "met": (m["newcomer_share_intervals_max"] or 99) <= 2,
            }
        )
    summary = next((b for b in beats if b["round"] == "median"), None)
    if summary is not None:
        c, k = summary["ConsumerGroupHeartbeat_per_s"], summary["Heartbeat_per_s"]
        out.append(
            {
                "claim": "ConsumerGroupHeartbeats/s >= Heartbeats/s (medians)",
                "measured": f"{c} vs {k} per second",
                "met": c is not None and k is not None and c >= k,
            }
        )
    return out


def protocol_stats(
    df: Any, ops: list[dict[str, Any]], groups: list[dict[str, Any]], out: Path
) -> dict[str, Any]:
    gauges = _gauges(df)
    settle = settle_table(groups)
    newcomer = newcomer_table(df, gauges)
    beats = heartbeat_table(df, ops)
    med = next((r for r in newcomer if r["round"] == "median"), {})
    interval = med.get("heartbeat_interval_ms")
    note = f"{med.get('old_members') or 0:.0f} members, heartbeat {interval or 0:.0f} ms"
    plot_protocols(settle, newcomer_gaps(df), out / PROTOCOLS_PLOT, note)
    # Flat lists of flat rows: results.md shows each as a table of its own.
    return {
        "protocols_claims": claims(settle, newcomer, beats),
        "protocols_settle": settle,
        "protocols_newcomer": newcomer,
        "protocols_heartbeat": beats,
        "protocols_cpu": cpu_table(gauges),
    }


PROTOCOLS_PLOT = "protocols_classic_vs_consumer.png"


def newcomer_gaps(df: Any) -> dict[str, list[float]]:
    """Per protocol, every old member's time without its unaffected partitions (ms), over
    all rounds: a hundred values a round, small enough to collect."""
    from pyspark.sql import functions as F

    rows = (
        df.filter(
            (F.col("kind") == "gauge")
            & (F.col("target") == "minicoord")
            & (F.col("op") == "without_kept_ms")
        )
        .select("step", "value")
        .collect()
    )
    gaps: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
    for r in rows:
        protocol, rest, _ = _split(r["step"])
        if protocol in gaps and rest == "newcomer":
            gaps[protocol].append(float(r["value"]))
    return gaps


def plot_protocols(
    settle: list[dict[str, Any]], gaps: dict[str, list[float]], path: Path, note: str = ""
) -> None:
    """Left: time to a settled group vs its size. Right: the newcomer's rebalance, each old
    member's time without its unaffected partitions, longest first."""
    from minicoord.bench.plots import _plt

    plt = _plt()
    fig, (ax, gap_ax) = plt.subplots(1, 2, figsize=(11.0, 4.0), dpi=90)
    for protocol, style in (("classic", "o-"), ("consumer", "s-")):
        points = [e for e in settle if e[f"{protocol}_ms"] is not None]
        if not points:
            continue
        xs = [e["group_size"] for e in points]
        ys = [e[f"{protocol}_ms"] for e in points]
        low = [y - e[f"{protocol}_min_ms"] for y, e in zip(ys, points, strict=True)]
        high = [e[f"{protocol}_max_ms"] - y for y, e in zip(ys, points, strict=True)]
        label = f"{protocol} (median of rounds; bars: min-max)"
        ax.errorbar(xs, ys, yerr=[low, high], fmt=style, capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("members in the group")
    ax.set_ylabel("first join -> group settled (ms, log)")
    ax.set_title("Time to a settled group")
    ax.grid(True, which="both", alpha=0.3)
    if settle:
        ax.legend(fontsize=8)
    for protocol, style in (("classic", "-"), ("consumer", "--")):
        values = sorted(gaps.get(protocol, []), reverse=True)
        if values:
            label = f"{protocol}: {sum(v > GAP_EPSILON_MS for v in values)} of {len(values)} > 0"
            gap_ax.plot(range(1, len(values) + 1), values, style, label=label)
    gap_ax.set_xlabel("old members that kept partitions (all rounds), longest gap first")
    gap_ax.set_ylabel("time without its unaffected partitions (ms)")
    gap_ax.set_title(f"A newcomer joins ({note})" if note else "A newcomer joins")
    gap_ax.grid(True, alpha=0.3)
    if any(gaps.values()):
        gap_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
