"""The report of a run: every figure computed by Spark from the raw Parquet (the modules
operation_stats, group_stats, load_stats, data_stats, comparison and plots), then summary.json,
results.md and the plots.

Only the small aggregated frames are collected to the driver, for the JSON, the markdown
table and matplotlib.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minicoord.bench.comparison import head_to_head, ratios, round_medians
from minicoord.bench.data_stats import data_stats
from minicoord.bench.group_stats import churn_stats, group_stats, rejoin_stats
from minicoord.bench.load_stats import rate_steps, saturation, scale_stats
from minicoord.bench.operation_stats import executor_stats, operation_stats
from minicoord.bench.plots import plot_cdf, plot_join_vs_size, plot_throughput
from minicoord.bench.protocol_members import CLASSIC, CONSUMER, HEARTBEAT_API
from minicoord.bench.protocol_stats import PROTOCOLS_PLOT, protocol_stats

CLASSIC_ONLY = ("Heartbeat", "JoinGroup", "SyncGroup", "LeaveGroup")

# The operations each scenario is about: they lead the markdown table and get CDF lines.
FOCUS = {
    "cold-join": ["cold_join", "join", "JoinGroup", "SyncGroup", "FindCoordinator"],
    "join-scaling": ["join", "JoinGroup", "SyncGroup"],
    "rejoin": ["rejoin", "rebalance", "Heartbeat"],
    "churn": ["rebalance", "JoinGroup", "SyncGroup", "LeaveGroup", "Heartbeat"],
    "heartbeat": ["Heartbeat"],
    "commit": ["OffsetCommit", "OffsetFetch"],
    "scale": ["join", "Heartbeat"],
    "head-to-head": ["Heartbeat", "OffsetCommit", "join"],
    "data": ["e2e"],
    "protocols": ["join", "newcomer_share", "ConsumerGroupHeartbeat", "Heartbeat", "JoinGroup"],
}


def _focus(scenario: str, protocol: str) -> list[str]:
    """The scenario's operations, in the members' protocol: a consumer-protocol member joins,
    heartbeats and rebalances with ConsumerGroupHeartbeat."""
    focus = FOCUS.get(scenario, [])
    if protocol != CONSUMER or scenario == "protocols":
        return focus
    mapped = [HEARTBEAT_API[CONSUMER] if op in CLASSIC_ONLY else op for op in focus]
    return list(dict.fromkeys(mapped))


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def markdown(summary: dict[str, Any]) -> str:
    protocol = summary["parameters"].get("group_protocol") or CLASSIC
    focus = _focus(summary["scenario"], protocol)
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
    sections = {
        **summary["results"],
        "ratios": summary["ratios"],
        "ratio_medians": summary.get("ratio_medians"),
    }
    for key, value in sections.items():
        # Only what is absent or empty is left out: a failed check (false) or a count of 0
        # is a result, and the one a reader must not miss.
        if value is None or value == [] or value == {}:
            continue
        lines += ["", f"## {key}", ""]
        items = value if isinstance(value, list) else [value]
        if items and all(isinstance(i, dict) for i in items):
            cols = list(dict.fromkeys(k for i in items for k in i))
            flat = all(
                not isinstance(i.get(c), dict)
                and not (
                    isinstance(i.get(c), list) and any(isinstance(v, dict | list) for v in i[c])
                )
                for i in items
                for c in cols
            )
            if flat:
                lines.append("| " + " | ".join(cols) + " |")
                lines.append("| " + " | ".join("---" for _ in cols) + " |")
                for i in items:
                    lines.append("| " + " | ".join(_cell(i.get(c, "")) for c in cols) + " |")
                continue
        lines += ["```json", json.dumps(value, indent=2), "```"]
    lines += ["", "Plots: " + ", ".join(f"![{p}]({p})" for p in summary["plots"]), ""]
    return "\n".join(lines)


def _gauge_sums(df: Any, op: str) -> dict[str, float]:
    """A gauge summed over every task and step, per target."""
    from pyspark.sql import functions as F

    rows = df.filter((F.col("kind") == "gauge") & (F.col("op") == op)).groupBy("target")
    return {r["target"]: r["total"] for r in rows.agg(F.sum("value").alias("total")).collect()}


def offsets_check(
    ops: list[dict[str, Any]], acknowledged: dict[str, float]
) -> tuple[bool | None, str | None]:
    """(whether OffsetFetch read back every acknowledged offset, on every target; why not).
    None: no check ran. A target where no commit was acknowledged had nothing to verify: that
    check did not run, and is reported as failed, never as passed."""
    checks = [o for o in ops if o["op"] == "verify_offsets"]
    if not checks:
        return None, None
    why = []
    for target in sorted({o["target"] for o in checks}):
        mismatched = sum(o["errors"] for o in checks if o["target"] == target)
        if mismatched:
            why.append(f"{target}: {mismatched} task(s) fetched offsets other than acknowledged")
        elif not acknowledged.get(target):
            why.append(f"{target}: no OffsetCommit was acknowledged, so nothing was verified")
    return not why, "; ".join(why) or None


def build(spark: Any, raw: str, out: Path, meta: dict[str, Any]) -> dict[str, Any]:
    df = spark.read.parquet(raw).cache()
    scenario = meta["scenario"]
    protocol = meta["parameters"].get("group_protocol") or CLASSIC
    beat = HEARTBEAT_API[protocol]
    ops = operation_stats(df)
    results: dict[str, Any] = {}
    if scenario in ("cold-join", "join-scaling", "head-to-head", "protocols"):
        results.update(group_stats(df, meta["partitions_by_step"]))
    if scenario == "protocols":
        results.update(protocol_stats(df, ops, results["groups"], out))
    if scenario == "rejoin":
        results["rounds"] = rejoin_stats(df)
    if scenario == "churn":
        results["churn"] = churn_stats(df)
    if scenario in ("heartbeat", "commit"):
        steps = rate_steps(df, ops, beat if scenario == "heartbeat" else "OffsetCommit")
        results["steps"] = steps
        results["saturation"] = saturation(steps)
    if scenario == "head-to-head":
        results["head_to_head"] = head_to_head(ops, results["groups"], beat)
        results["steps"] = rate_steps(df, ops, beat) + rate_steps(df, ops, "OffsetCommit")
    if scenario in ("commit", "head-to-head"):
        verified, why = offsets_check(ops, _gauge_sums(df, "offsets_acknowledged"))
        results["offsets_verified"] = verified
        if why:
            results["offsets_not_verified"] = why
    if scenario == "data":
        results.update(data_stats(df, ops, int(meta["parameters"]["record_bytes"])))
    if scenario == "scale":
        results["scale"] = scale_stats(df, ops, beat)
    plots = ["latency_cdf.png", "join_vs_group_size.png", "throughput.png"]
    plot_cdf(df, _focus(scenario, protocol), out / plots[0])
    results["join_vs_group_size"] = plot_join_vs_size(df, out / plots[1])
    plot_throughput(df, out / plots[2])
    if scenario == "protocols":
        plots.append(PROTOCOLS_PLOT)
    summary = {
        **{k: v for k, v in meta.items() if k != "parameters"},
        "target": meta["targets"].get("minicoord"),
        "parameters": meta["parameters"],
        "executors": executor_stats(df),
        "operations": ops,
        "results": results,
        "ratios": ratios(ops),
        "ratio_medians": round_medians(ratios(ops), ["rate_ratio", "p50_ratio", "p99_ratio"]),
        "raw": "raw.parquet",
        "plots": plots,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "results.md").write_text(markdown(summary))
    df.unpersist()
    return summary
