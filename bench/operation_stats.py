"""The per-operation figures of every run, aggregated in Spark over the raw rows: count,
errors, p50/p95/p99/max latency and rate per (target, step, operation), and which executor
ran which tasks. Also the rounding every report figure goes through.
"""

from __future__ import annotations

import math
from typing import Any

from minicoord.bench.task_run import ROUND_MARK

QUANTILES = (0.5, 0.95, 0.99)
ACCURACY = 10_000  # percentile_approx relative error ~1/ACCURACY


def rounded(x: Any, digits: int = 3) -> Any:
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


def base_step(F: Any) -> Any:
    """The step column without its round tag (task_run.round_step): "setup #2" -> "setup"."""
    return F.regexp_replace(F.col("step"), f"{ROUND_MARK}[0-9]+$", "")


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
                "p50_ms": rounded(q[0]),
                "p95_ms": rounded(q[1]),
                "p99_ms": rounded(q[2]),
                "max_ms": rounded(r["max_ms"]),
                "rate_per_s": rounded(r["count"] / span if span > 0 else None, 1),
                # Error-free answers only: what throughput, saturation and ratios count (a
                # rejected heartbeat is served, but it is not the work being measured).
                "ok_per_s": rounded((r["count"] - r["errors"]) / span if span > 0 else None, 1),
                "span_s": rounded(span),
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
