"""Aggregation in Spark over the raw measurements, then summary.json, results.md and plots.

Every number in the report is computed by Spark from the raw Parquet (percentile_approx for
p50/p95/p99, max, counts, rates); only the small aggregated frames are collected to the
driver, for the JSON, the markdown table and matplotlib.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

QUANTILES = (0.5, 0.95, 0.99)
ACCURACY = 10_000  # percentile_approx relative error ~1/ACCURACY
CDF_POINTS = [i / 200 for i in range(1, 200)] + [0.995, 0.999]

# The operations each scenario is about: they lead the markdown table and get CDF lines.
FOCUS = {
    "cold-join": ["cold_join", "join", "JoinGroup", "SyncGroup", "FindCoordinator"],
    "join-scaling": ["join", "JoinGroup", "SyncGroup"],
    "rejoin": ["rejoin", "rebalance", "Heartbeat"],
    "churn": ["rebalance", "JoinGroup", "SyncGroup", "LeaveGroup", "Heartbeat"],
    "heartbeat": ["Heartbeat"],
    "commit": ["OffsetCommit", "OffsetFetch"],
    "scale": ["join", "Heartbeat"],
}


def _f(x: Any, digits: int = 3) -> Any:
    """Round for JSON; NaN/None become None."""
    if x is None:
        return None
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return None
        return round(x, digits)
    return x


def _latency(F: Any) -> Any:
    # Requests count whatever they answered (an error is a served request); a phase that
    # failed (timeout, refused) has no meaningful duration and is only counted as an error.
    return F.when((F.col("kind") == "request") | (F.col("error") == 0), F.col("latency_ms"))


def operation_stats(df: Any) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    qs = F.array(*[F.lit(q) for q in QUANTILES])
    rows = (
        df.filter(F.col("kind").isin("request", "phase"))
        .groupBy("target", "step", "kind", "op")
        .agg(
            F.count("*").alias("count"),
            F.sum(F.when(F.col("error") != 0, 1).otherwise(0)).alias("errors"),
            F.percentile_approx(_latency(F), qs, ACCURACY).alias("q"),
            F.max(_latency(F)).alias("max_ms"),
            F.min("start").alias("t0"),
            F.max("end").alias("t1"),
        )
        .orderBy("target", "step", "kind", "op")
        .collect()
    )
    out = []
    for r in rows:
        q = r["q"] or [None] * len(QUANTILES)
        span = (r["t1"] - r["t0"]) if r["t1"] is not None else 0.0
        out.append(
            {
                "target": r["target"],
                "step": r["step"],
                "kind": r["kind"],
                "op": r["op"],
                "count": r["count"],
                "errors": r["errors"],
                "p50_ms": _f(q[0]),
                "p95_ms": _f(q[1]),
                "p99_ms": _f(q[2]),
                "max_ms": _f(r["max_ms"]),
                "rate_per_s": _f(r["count"] / span if span > 0 else None, 1),
                "span_s": _f(span),
            }
        )
    return out


def executor_stats(df: Any) -> list[dict[str, Any]]:
    """Which executor (host:port) ran which tasks, per target: where the load came from."""
    from pyspark.sql import functions as F

    rows = (
        df.groupBy("target", "executor")
        .agg(F.sort_array(F.collect_set("task")).alias("tasks"), F.count("*").alias("rows"))
        .orderBy("target", "executor")
        .collect()
    )
    return [
        {"target": r["target"], "executor": r["executor"], "tasks": r["tasks"], "rows": r["rows"]}
        for r in rows
    ]


def group_stats(df: Any, partitions: dict[str, int]) -> dict[str, Any]:
    """Per group: time to Stable (first JoinGroup of any member to the last member's
    assignment of the full generation), join rounds (the generation it settled at), and
    whether its assignment is disjoint and complete."""
    from pyspark.sql import functions as F

    joins = df.filter((F.col("kind") == "phase") & (F.col("op") == "join"))
    per_group = joins.groupBy("target", "step", "group_id").agg(
        F.min("start").alias("t0"),
        F.max("end").alias("t1"),
        F.max("generation").alias("rounds"),
        F.count("*").alias("members"),
        F.sum(F.when(F.col("error") != 0, 1).otherwise(0)).alias("failed"),
        F.max("group_size").alias("size"),
        F.avg("value").alias("join_trips"),
    )
    per_group = per_group.withColumn("stable_ms", (F.col("t1") - F.col("t0")) * 1000)
    qs = F.array(*[F.lit(q) for q in QUANTILES])
    summary = (
        per_group.groupBy("target", "step")
        .agg(
            F.count("*").alias("groups"),
            F.max("size").alias("group_size"),
            F.percentile_approx("stable_ms", qs, ACCURACY).alias("q"),
            F.max("stable_ms").alias("max_ms"),
            F.avg("rounds").alias("rounds_avg"),
            F.max("rounds").alias("rounds_max"),
            F.avg("join_trips").alias("join_trips_avg"),
            F.sum(F.when(F.col("failed") > 0, 1).otherwise(0)).alias("groups_with_failures"),
        )
        .orderBy("target", "step")
        .collect()
    )
    assignments = (
        df.filter(F.col("kind") == "assignment")
        .groupBy("target", "step", "group_id")
        .agg(
            F.count("*").alias("held"),
            F.countDistinct("op").alias("distinct"),
            F.countDistinct("generation").alias("generations"),
        )
    )
    expected = F.create_map(*[x for k, v in partitions.items() for x in (F.lit(k), F.lit(v))])
    checked = (
        per_group.join(assignments, ["target", "step", "group_id"], "left")
        .withColumn("partitions", expected[F.col("step")])
        .withColumn(
            "ok",
            (F.col("failed") == 0)
            & (F.col("members") == F.col("size"))
            & (F.col("held") == F.col("partitions"))
            & (F.col("distinct") == F.col("partitions"))
            & (F.col("generations") == 1),
        )
    )
    verdict = {
        (r["target"], r["step"]): (r["ok"], r["bad"])
        for r in checked.groupBy("target", "step")
        .agg(
            F.sum(F.when(F.col("ok"), 1).otherwise(0)).alias("ok"),
            F.sum(F.when(F.col("ok"), 0).otherwise(1)).alias("bad"),
        )
        .collect()
    }
    bad_examples = [
        r.asDict()
        for r in checked.filter(~F.col("ok") | F.col("ok").isNull())
        .select("target", "step", "group_id", "members", "size", "held", "distinct", "generations")
        .limit(10)
        .collect()
    ]
    out = []
    for r in summary:
        q = r["q"] or [None] * 3
        ok, bad = verdict.get((r["target"], r["step"]), (0, r["groups"]))
        out.append(
            {
                "target": r["target"],
                "step": r["step"],
                "groups": r["groups"],
                "group_size": r["group_size"],
                "time_to_stable_p50_ms": _f(q[0]),
                "time_to_stable_p95_ms": _f(q[1]),
                "time_to_stable_p99_ms": _f(q[2]),
                "time_to_stable_max_ms": _f(r["max_ms"]),
                "join_rounds_avg": _f(r["rounds_avg"]),
                "join_rounds_max": r["rounds_max"],
                "join_requests_per_member_avg": _f(r["join_trips_avg"]),
                "groups_with_failures": r["groups_with_failures"],
                "assignment_disjoint_and_complete": ok,
                "assignment_violations": bad,
            }
        )
    return {"groups": out, "assignment_violation_examples": bad_examples}


def rejoin_stats(df: Any) -> list[dict[str, Any]]:
    """Per round: from the newcomer's first request until every member holds the new
    generation's assignment."""
    from pyspark.sql import functions as F

    rows = (
        df.filter((F.col("kind") == "phase") & (F.col("op") == "rejoin"))
        .groupBy("target", "step")
        .agg(
            F.max(F.when(F.col("error") == 0, F.col("latency_ms"))).alias("all_reassigned_ms"),
            F.percentile_approx(F.when(F.col("error") == 0, F.col("latency_ms")), 0.5).alias("p50"),
            F.count("*").alias("members"),
            F.sum(F.when(F.col("error") != 0, 1).otherwise(0)).alias("not_reassigned"),
            F.max("group_size").alias("group_size"),
        )
        .orderBy("target", "step")
        .collect()
    )
    return [
        {
            "target": r["target"],
            "round": r["step"],
            "group_size": r["group_size"],
            "all_reassigned_ms": _f(r["all_reassigned_ms"]),
            "member_reassigned_p50_ms": _f(r["p50"]),
            "members": r["members"],
            "not_reassigned": r["not_reassigned"],
        }
        for r in rows
    ]


def churn_stats(df: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    rebalances = (
        df.filter((F.col("kind") == "phase") & (F.col("op") == "rebalance"))
        .groupBy("target", "group_id", "generation")
        .agg(
            ((F.max("end") - F.min("start")) * 1000).alias("ms"),
            F.count("*").alias("members"),
            F.min("start").alias("t0"),
            F.max("end").alias("t1"),
        )
    )
    qs = F.array(*[F.lit(q) for q in QUANTILES])
    per_target = {
        r["target"]: {
            "rebalances_completed": r["n"],
            "rebalance_p50_ms": _f((r["q"] or [None])[0]),
            "rebalance_p95_ms": _f((r["q"] or [None] * 3)[1]),
            "rebalance_p99_ms": _f((r["q"] or [None] * 3)[2]),
            "rebalance_max_ms": _f(r["mx"]),
            "members_per_rebalance_avg": _f(r["m"]),
            "rebalances_per_s": _f(r["n"] / (r["t1"] - r["t0"]) if r["t1"] > r["t0"] else None),
        }
        for r in rebalances.groupBy("target")
        .agg(
            F.count("*").alias("n"),
            F.percentile_approx("ms", qs, ACCURACY).alias("q"),
            F.max("ms").alias("mx"),
            F.avg("members").alias("m"),
            F.min("t0").alias("t0"),
            F.max("t1").alias("t1"),
        )
        .collect()
    }
    errors = (
        df.filter((F.col("error") != 0) & F.col("kind").isin("request", "phase"))
        .groupBy("target", "kind", "op", "error")
        .count()
        .orderBy("target", "op", "error")
        .collect()
    )
    for r in errors:
        entry = per_target.setdefault(r["target"], {})
        entry.setdefault("errors", []).append(
            {"op": r["op"], "kind": r["kind"], "error": r["error"], "count": r["count"]}
        )
    return per_target


def rate_steps(df: Any, ops: list[dict[str, Any]], op_name: str) -> list[dict[str, Any]]:
    """Heartbeat/commit steps: achieved vs offered rate, server CPU, saturation."""
    from pyspark.sql import functions as F

    gauges = {
        (r["target"], r["step"], r["op"]): r["v"]
        for r in df.filter(F.col("kind") == "gauge")
        .groupBy("target", "step", "op")
        .agg(F.max("value").alias("v"))
        .collect()
    }
    out = []
    for o in ops:
        if o["kind"] != "request" or o["op"] != op_name or o["step"] in ("setup", "teardown"):
            continue
        key = (o["target"], o["step"])
        cpu = gauges.get((*key, "server_cpu_s"))
        offered = gauges.get((*key, "offered_rate")) or None
        entry = {
            "target": o["target"],
            "step": o["step"],
            "offered_per_s": offered,
            "achieved_per_s": o["rate_per_s"],
            "p50_ms": o["p50_ms"],
            "p99_ms": o["p99_ms"],
            "errors": o["errors"],
            "server_cpu_cores": _f(cpu / o["span_s"], 2) if cpu and o["span_s"] else None,
            "per_server_cpu_second": _f(o["count"] / cpu, 0) if cpu else None,
        }
        out.append(entry)
    return out


def saturation(steps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for target in sorted({s["target"] for s in steps}):
        mine = [s for s in steps if s["target"] == target]
        held = [
            s["offered_per_s"]
            for s in mine
            if s["offered_per_s"] and (s["achieved_per_s"] or 0) >= 0.95 * s["offered_per_s"]
        ]
        missed = [
            s["offered_per_s"]
            for s in mine
            if s["offered_per_s"] and (s["achieved_per_s"] or 0) < 0.95 * s["offered_per_s"]
        ]
        out[target] = {
            "max_achieved_per_s": max((s["achieved_per_s"] or 0 for s in mine), default=None),
            "highest_rate_held": max(held, default=None),
            "lowest_rate_missed": min(missed, default=None),
            "max_per_server_cpu_second": max(
                (s["per_server_cpu_second"] or 0 for s in mine), default=None
            ),
        }
    return out


def scale_stats(df: Any, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    g = {
        (r["step"], r["op"]): (r["v"], r["n"])
        for r in df.filter(F.col("kind") == "gauge")
        .groupBy("step", "op")
        .agg(F.max("value").alias("v"), F.sum("value").alias("n"))
        .collect()
    }
    base = g.get(("members=0", "server_rss_kib"), (None, None))[0]
    out = []
    steps = sorted(
        {s for s, _ in g if s.startswith("members=") and s != "members=0"},
        key=lambda s: int(s.split("=")[1]),
    )
    for step in steps:
        members = int(step.split("=")[1])
        rss = g.get((step, "server_rss_kib"), (None, None))[0]
        hb = next(
            (
                o
                for o in ops
                if o["step"] == step and o["op"] == "Heartbeat" and o["kind"] == "request"
            ),
            None,
        )
        out.append(
            {
                "members": members,
                "held": bool(g.get((step, "wave_ok"), (0, 0))[0]),
                "server_rss_kib": rss,
                "server_rss_baseline_kib": base,
                "rss_per_member_kib": _f((rss - base) / members, 3) if rss and base else None,
                "client_connections": g.get((step, "connections"), (None, None))[1],
                "heartbeat_p99_ms": hb["p99_ms"] if hb else None,
                "heartbeat_errors": hb["errors"] if hb else None,
            }
        )
    return out


def ratios(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """minicoord's rate and latency relative to each other target, per (step, operation)."""
    base = {(o["step"], o["kind"], o["op"]): o for o in ops if o["target"] == "minicoord"}
    out = []
    for o in ops:
        if o["target"] == "minicoord":
            continue
        mine = base.get((o["step"], o["kind"], o["op"]))
        if mine is None:
            continue

        def div(a: Any, b: Any) -> Any:
            return _f(a / b, 3) if a is not None and b else None

        out.append(
            {
                "versus": o["target"],
                "step": o["step"],
                "op": o["op"],
                "rate_ratio": div(mine["rate_per_s"], o["rate_per_s"]),
                "p50_ratio": div(mine["p50_ms"], o["p50_ms"]),
                "p99_ratio": div(mine["p99_ms"], o["p99_ms"]),
            }
        )
    return out


# -- plots ---------------------------------------------------------------------------------


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_cdf(df: Any, focus: list[str], path: Path) -> None:
    from pyspark.sql import functions as F

    rows = (
        df.filter(F.col("kind").isin("request", "phase") & F.col("op").isin(focus))
        .filter((F.col("kind") == "request") | (F.col("error") == 0))
        .filter(~F.col("step").isin("setup", "teardown", "unfinished"))
        .groupBy("target", "step", "op")
        .agg(
            F.percentile_approx(
                "latency_ms", F.array(*[F.lit(q) for q in CDF_POINTS]), ACCURACY
            ).alias("q"),
            F.count("*").alias("n"),
        )
        .orderBy(F.desc("n"))
        .limit(10)
        .collect()
    )
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=90)
    for r in sorted(rows, key=lambda r: (r["target"], r["op"], r["step"])):
        ax.plot(r["q"], CDF_POINTS, label=f"{r['target']} {r['op']} [{r['step']}]")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of operations")
    ax.set_title("Latency CDF")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        ax.legend(fontsize=7, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no measurements", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_join_vs_size(df: Any, path: Path) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    per_group = (
        df.filter((F.col("kind") == "phase") & (F.col("op") == "join") & (F.col("error") == 0))
        .groupBy("target", "step", "group_id")
        .agg(
            ((F.max("end") - F.min("start")) * 1000).alias("stable_ms"),
            F.max("group_size").alias("size"),
            F.percentile_approx("latency_ms", 0.5).alias("member_p50"),
        )
    )
    rows = (
        per_group.groupBy("target", "size")
        .agg(
            F.percentile_approx("stable_ms", 0.5).alias("stable_p50"),
            F.max("stable_ms").alias("stable_max"),
            F.percentile_approx("member_p50", 0.5).alias("member_p50"),
        )
        .orderBy("target", "size")
        .collect()
    )
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=90)
    for target in sorted({r["target"] for r in rows}):
        mine = [r for r in rows if r["target"] == target]
        xs = [r["size"] for r in mine]
        ax.plot(
            xs,
            [r["stable_p50"] for r in mine],
            "o-",
            label=f"{target}: time to Stable (p50 over groups)",
        )
        ax.plot(xs, [r["stable_max"] for r in mine], "x--", label=f"{target}: time to Stable (max)")
        ax.plot(xs, [r["member_p50"] for r in mine], "s:", label=f"{target}: member join p50")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("members in the group")
    ax.set_ylabel("ms (log scale)")
    ax.set_title("Join latency vs group size")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no joins in this scenario", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return [
        {
            "target": r["target"],
            "group_size": r["size"],
            "time_to_stable_p50_ms": _f(r["stable_p50"]),
            "time_to_stable_max_ms": _f(r["stable_max"]),
            "member_join_p50_ms": _f(r["member_p50"]),
        }
        for r in rows
    ]


def plot_throughput(df: Any, path: Path) -> None:
    from pyspark.sql import functions as F

    rows = (
        df.filter(F.col("kind") == "request")
        .withColumn("second", F.floor("end"))
        .groupBy("target", "op", "second")
        .count()
        .collect()
    )
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=90)
    series: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for r in rows:
        series.setdefault((r["target"], r["op"]), []).append((r["second"], r["count"]))
    # The busiest few series; each target's time axis starts at its own first request.
    top = sorted(series, key=lambda k: -sum(c for _, c in series[k]))[:8]
    starts = {
        t: min(s for (tt, _), pts in series.items() if tt == t for s, _ in pts) for t, _ in top
    }
    for key in sorted(top):
        pts = sorted(series[key])
        t0 = starts[key[0]]
        ax.plot([s - t0 for s, _ in pts], [c for _, c in pts], label=f"{key[0]} {key[1]}")
    ax.set_xlabel("seconds since the target's first request")
    ax.set_ylabel("responses per second")
    ax.set_title("Throughput over time")
    ax.grid(True, alpha=0.3)
    if top:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -- the report ----------------------------------------------------------------------------


def markdown(summary: dict[str, Any]) -> str:
    focus = FOCUS.get(summary["scenario"], [])
    lines = [
        f"# minicoord bench: {summary['scenario']}",
        "",
        "targets: " + ", ".join(f"{k} `{v}`" for k, v in summary["targets"].items()),
        "",
        "executors: "
        + ", ".join(
            f"{e['target']} tasks {e['tasks']} on `{e['executor'] or 'this process'}`"
            for e in summary["executors"]
        ),
        "",
        "| target | step | operation | count | errors "
        "| p50 ms | p95 ms | p99 ms | max ms | rate/s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ops = sorted(
        summary["operations"],
        key=lambda o: (o["target"], o["step"], focus.index(o["op"]) if o["op"] in focus else 99),
    )
    for o in ops:
        lines.append(
            f"| {o['target']} | {o['step']} | {o['op']} | {o['count']} | {o['errors']} "
            f"| {o['p50_ms']} | {o['p95_ms']} | {o['p99_ms']} | {o['max_ms']} | {o['rate_per_s']} |"
        )
    for key, value in summary["results"].items():
        if not value:
            continue
        lines += ["", f"## {key}", ""]
        items = value if isinstance(value, list) else [value]
        if items and all(isinstance(i, dict) for i in items):
            cols = list(dict.fromkeys(k for i in items for k in i))
            if all(not isinstance(i.get(c), dict | list) for i in items for c in cols):
                lines.append("| " + " | ".join(cols) + " |")
                lines.append("| " + " | ".join("---" for _ in cols) + " |")
                for i in items:
                    lines.append("| " + " | ".join(str(i.get(c, "")) for c in cols) + " |")
                continue
        lines += ["```json", json.dumps(value, indent=2), "```"]
    lines += ["", "Plots: " + ", ".join(f"![{p}]({p})" for p in summary["plots"]), ""]
    return "\n".join(lines)


def build(spark: Any, raw: str, out: Path, meta: dict[str, Any]) -> dict[str, Any]:
    df = spark.read.parquet(raw).cache()
    scenario = meta["scenario"]
    ops = operation_stats(df)
    results: dict[str, Any] = {}
    if scenario in ("cold-join", "join-scaling"):
        results.update(group_stats(df, meta["partitions_by_step"]))
    if scenario == "rejoin":
        results["rounds"] = rejoin_stats(df)
    if scenario == "churn":
        results["churn"] = churn_stats(df)
    if scenario in ("heartbeat", "commit"):
        steps = rate_steps(df, ops, "Heartbeat" if scenario == "heartbeat" else "OffsetCommit")
        results["steps"] = steps
        results["saturation"] = saturation(steps)
    if scenario == "commit":
        results["offsets_verified"] = next(
            (o["errors"] == 0 for o in ops if o["op"] == "verify_offsets"), None
        )
    if scenario == "scale":
        results["scale"] = scale_stats(df, ops)
    plots = ["latency_cdf.png", "join_vs_group_size.png", "throughput.png"]
    plot_cdf(df, FOCUS.get(scenario, []), out / plots[0])
    results["join_vs_group_size"] = plot_join_vs_size(df, out / plots[1])
    plot_throughput(df, out / plots[2])
    summary = {
        **{k: v for k, v in meta.items() if k != "parameters"},
        "target": meta["targets"].get("minicoord"),
        "parameters": meta["parameters"],
        "executors": executor_stats(df),
        "operations": ops,
        "results": results,
        "ratios": ratios(ops),
        "raw": "raw.parquet",
        "plots": plots,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "results.md").write_text(markdown(summary))
    df.unpersist()
    return summary
