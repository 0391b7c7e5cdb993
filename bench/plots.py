"""The plots of every run, from aggregates Spark computes: latency CDF, join time vs group
size, throughput over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minicoord.bench.operation_stats import ACCURACY, base_step, rounded

CDF_POINTS = [i / 200 for i in range(1, 200)] + [0.995, 0.999]
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
        .filter(~base_step(F).isin("setup", "teardown", "unfinished"))
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
            "time_to_stable_p50_ms": rounded(r["stable_p50"]),
            "time_to_stable_max_ms": rounded(r["stable_max"]),
            "member_join_p50_ms": rounded(r["member_p50"]),
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
