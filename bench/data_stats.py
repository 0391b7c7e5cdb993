"""Figures of the data scenario, aggregated in Spark over the raw rows: per target and step,
records and bytes per second produced and consumed, end-to-end latency, whether every record
produced was consumed, the CPU of each client process, the server and the machine, and the
server's memory; then minicoord's ratios to each other target.

A step's rate is its records over its window: from the common start to the last task's end
(the last delivery acknowledged, or the last record consumed).
"""

from __future__ import annotations

from typing import Any

from minicoord.bench.comparison import round_medians
from minicoord.bench.operation_stats import rounded
from minicoord.bench.task_run import round_step, split_round

MB = 1_000_000  # MB/s as Kafka's tools print it: 10^6 bytes
KIB_PER_MIB = 1024
RATIO_METRICS = ["produce_rate_ratio", "consume_rate_ratio", "e2e_p50_ratio", "e2e_p99_ratio"]


def _totals(df: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    from pyspark.sql import functions as F

    rows = (
        df.filter(F.col("kind") == "total")
        .groupBy("target", "step", "op")
        .agg(
            F.sum("value").alias("records"),
            F.sum("error").alias("failed"),
            F.min("start").alias("t0"),
            F.max("end").alias("t1"),
        )
        .collect()
    )
    return {(r["target"], r["step"], r["op"]): r.asDict() for r in rows}


def _gauges(df: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per (target, step, gauge): the largest value, and for CPU gauges the cores each task
    used over its own window (cpu seconds / window seconds), by task."""
    from pyspark.sql import functions as F

    window = F.col("end") - F.col("start")
    rows = (
        df.filter(F.col("kind") == "gauge")
        .withColumn("cores", F.when(window > 0, F.col("value") / window))
        .groupBy("target", "step", "op")
        .agg(
            F.max("value").alias("max"),
            F.max("cores").alias("cores_max"),
            F.sort_array(F.collect_list(F.struct("task", "cores"))).alias("by_task"),
        )
        .collect()
    )
    return {(r["target"], r["step"], r["op"]): r.asDict(recursive=True) for r in rows}


STEP_ORDER = ("fill", "produce", "consume", "e2e")


def _step_order(key: tuple[str, str]) -> tuple[int, int, str, str]:
    target, step = key
    base, round_ = split_round(step)
    kind = base.split(" ", 1)[0]
    order = STEP_ORDER.index(kind) if kind in STEP_ORDER else len(STEP_ORDER)
    return round_, order, base, target


def _rate(records: float | None, t0: float | None, t1: float | None) -> float | None:
    if not records or t0 is None or t1 is None or t1 <= t0:
        return None
    return records / (t1 - t0)


def data_stats(df: Any, ops: list[dict[str, Any]], record_bytes: int) -> dict[str, Any]:
    """results["data"] (one entry per target and step), results["records_verified"], and
    the ratios to other targets (per step, and their medians over rounds)."""
    totals = _totals(df)
    gauges = _gauges(df)
    e2e = {(o["target"], o["step"]): o for o in ops if o["op"] == "e2e" and o["kind"] == "phase"}
    # Round by round, steps in the order they ran, targets side by side.
    steps = sorted({(t, s) for t, s, _ in totals}, key=_step_order)
    entries = []
    for target, step in steps:
        base, round_ = split_round(step)
        entry: dict[str, Any] = {"target": target, "step": step}
        produced = totals.get((target, step, "produce"))
        consumed = totals.get((target, step, "consume"))
        if produced:
            rate = _rate(produced["records"], produced["t0"], produced["t1"])
            entry["records_produced"] = int(produced["records"])
            entry["produce_failed"] = int(produced["failed"])
            entry["produce_records_per_s"] = rounded(rate, 0)
            entry["produce_mb_per_s"] = rounded(rate * record_bytes / MB, 1) if rate else None
        if consumed:
            rate = _rate(consumed["records"], consumed["t0"], consumed["t1"])
            entry["records_consumed"] = int(consumed["records"])
            entry["consume_errors"] = int(consumed["failed"])
            entry["consume_records_per_s"] = rounded(rate, 0)
            entry["consume_mb_per_s"] = rounded(rate * record_bytes / MB, 1) if rate else None
        rebalanced = totals.get((target, step, "consume_rebalances"))
        if rebalanced:
            entry["rebalances_during_step"] = int(rebalanced["records"])
        latency = e2e.get((target, step))
        if latency:
            entry["offered_per_s"] = (gauges.get((target, step, "offered_rate")) or {}).get("max")
            entry["e2e_p50_ms"] = latency["p50_ms"]
            entry["e2e_p99_ms"] = latency["p99_ms"]
            entry["e2e_max_ms"] = latency["max_ms"]
        entry["verified"] = _verified(totals, target, base, round_)
        cpu = gauges.get((target, step, "client_cpu_s"))
        if cpu:
            # Per task, one process each: near 1.0 core (or more: librdkafka's threads), the
            # load generator may be what limits the rate.
            entry["client_cpu_cores_by_task"] = [rounded(t["cores"], 2) for t in cpu["by_task"]]
            entry["client_cpu_cores_all_tasks"] = rounded(
                sum(t["cores"] or 0 for t in cpu["by_task"]), 2
            )
        for name, key in (("server_cpu_s", "server_cpu_cores"), ("host_busy_s", "host_busy_cores")):
            g = gauges.get((target, step, name))
            if g:
                entry[key] = rounded(g["cores_max"], 2)
        for name in (
            "server_rss_before",
            "server_rss",
            "server_rss_settled",
            "server_rss_anon",
            "server_rss_file",
        ):
            g = gauges.get((target, step, f"{name}_kib"))
            if g:
                entry[f"{name}_mib"] = rounded(g["max"] / KIB_PER_MIB, 1)
        if base == "fill" and produced:
            entry["fill_bytes"] = int(produced["records"]) * record_bytes
        entries.append(entry)
    ratios = data_ratios(entries)
    return {
        "data": entries,
        "records_verified": all(e["verified"] is not False for e in entries),
        "data_ratios": ratios,
        "data_ratio_medians": round_medians(ratios, RATIO_METRICS),
    }


def _verified(
    totals: dict[tuple[str, str, str], dict[str, Any]], target: str, base: str, round_: int
) -> bool | None:
    """Every record acknowledged was consumed, once, and none failed: in `consume`, as many
    as `produce` of the same round acknowledged, every partition read to its end; in `e2e`,
    as many as that step's producers had acknowledged. None where nothing is consumed."""

    def get(step: str, op: str) -> dict[str, Any] | None:
        return totals.get((target, round_step(step, round_), op))

    if base == "consume":
        produced, consumed = get("produce", "produce"), get("consume", "consume")
        expected = get("consume", "consume_expected")
        if not (produced and consumed and expected):
            return False
        return (
            produced["failed"] == 0
            and consumed["failed"] == 0
            and expected["failed"] == 0  # partitions whose end was not reached
            and consumed["records"] == expected["records"] == produced["records"]
        )
    if base.startswith("e2e"):
        step = round_step(base, round_)
        produced = totals.get((target, step, "produce"))
        consumed = totals.get((target, step, "consume"))
        if not (produced and consumed):
            return False
        return (
            produced["failed"] == 0
            and consumed["failed"] == 0
            and consumed["records"] == produced["records"]
        )
    return None


def data_ratios(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """minicoord / other per step: produce and consume rates (above 1: minicoord faster),
    e2e latencies (below 1: minicoord faster)."""
    mine = {e["step"]: e for e in entries if e["target"] == "minicoord"}
    out = []
    for e in entries:
        m = mine.get(e["step"])
        if e["target"] == "minicoord" or m is None:
            continue

        def div(key: str, m: dict[str, Any] = m, e: dict[str, Any] = e) -> float | None:
            a, b = m.get(key), e.get(key)
            return rounded(a / b, 3) if a is not None and b else None

        out.append(
            {
                "versus": e["target"],
                "step": e["step"],
                "produce_rate_ratio": div("produce_records_per_s"),
                "consume_rate_ratio": div("consume_records_per_s"),
                "e2e_p50_ratio": div("e2e_p50_ms"),
                "e2e_p99_ratio": div("e2e_p99_ms"),
            }
        )
    return out
