"""Figures of a steady load: achieved vs offered rate and server CPU per step (heartbeat,
commit), the saturation point, and server memory per member held (scale)."""

from __future__ import annotations

from typing import Any

from minicoord.bench.operation_stats import rounded
from minicoord.bench.task_run import split_round
from minicoord.clients.member_base import error_name


def rate_steps(df: Any, ops: list[dict[str, Any]], op_name: str) -> list[dict[str, Any]]:
    """Heartbeat/commit steps: achieved vs offered rate, server CPU, saturation."""
    from pyspark.sql import functions as F

    rows = (
        df.filter(F.col("kind") == "gauge")
        .groupBy("target", "step", "op")
        .agg(F.max("value").alias("v"), F.sum("value").alias("total"))
        .collect()
    )
    gauges = {(r["target"], r["step"], r["op"]): r["v"] for r in rows}
    codes: dict[tuple[str, str], list[str]] = {}
    for r in (
        df.filter((F.col("kind") == "request") & (F.col("op") == op_name) & (F.col("error") != 0))
        .groupBy("target", "step", "error")
        .count()
        .orderBy("target", "step", F.desc("count"))
        .collect()
    ):
        codes.setdefault((r["target"], r["step"]), []).append(
            f"{error_name(r['error'])} {r['count']}"
        )
    sums = {(r["target"], r["step"], r["op"]): r["total"] for r in rows}
    out = []
    for o in ops:
        if o["kind"] != "request" or o["op"] != op_name:
            continue
        if split_round(o["step"])[0] in ("setup", "teardown", "unfinished"):
            continue
        key = (o["target"], o["step"])
        cpu = gauges.get((*key, "server_cpu_s"))
        offered = gauges.get((*key, "offered_rate")) or None
        span = o["span_s"]
        # The busiest task's CPU: near 1.0 core, the load generator set the pace.
        client_max = gauges.get((*key, "client_cpu_s"))
        client_sum = sums.get((*key, "client_cpu_s"))
        host = gauges.get((*key, "host_busy_s"))
        entry = {
            "target": o["target"],
            "step": o["step"],
            "offered_per_s": offered,
            # Error-free answers per second; error answers are counted apart (errors).
            "achieved_per_s": o["ok_per_s"],
            "p50_ms": o["p50_ms"],
            "p99_ms": o["p99_ms"],
            "answers": o["count"],
            "errors": o["errors"],
            "error_codes": codes.get(key, []),
            "server_cpu_cores": rounded(cpu / span, 2) if cpu and span else None,
            "per_server_cpu_second": (
                rounded((o["count"] - o["errors"]) / cpu, 0) if cpu else None
            ),
            "client_cpu_cores_busiest_task": (
                rounded(client_max / span, 2) if client_max and span else None
            ),
            "client_cpu_cores_all_tasks": (
                rounded(client_sum / span, 2) if client_sum and span else None
            ),
            "host_busy_cores": rounded(host / span, 2) if host is not None and span else None,
        }
        out.append(entry)
    return out


def saturation(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Per target, over its steps' error-free rates (achieved_per_s)."""
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
            # None (not measured) when the server's CPU could not be read (--bootstrap to a
            # server on another host, no --compare-pid): never a 0 that reads as a result.
            "max_per_server_cpu_second": max(
                (s["per_server_cpu_second"] for s in mine if s["per_server_cpu_second"]),
                default=None,
            ),
        }
    return out


def step_errors_line(steps: list[dict[str, Any]]) -> str | None:
    """One line naming every timed step that saw error answers (None: none did)."""
    seen = [
        f"{s['target']} {s['step']}: {s['errors']:,} of {s['answers']:,}"
        + (f" ({', '.join(s['error_codes'])})" if s.get("error_codes") else "")
        for s in steps
        if s.get("errors")
    ]
    if not seen:
        return None
    return (
        "ERRORS in timed steps (achieved_per_s and the ratios count only error-free answers): "
        + "; ".join(seen)
    )


def scale_stats(
    df: Any, ops: list[dict[str, Any]], heartbeat: str = "Heartbeat"
) -> list[dict[str, Any]]:
    """Per wave: memory, connections and the members' heartbeats (`heartbeat` names their
    protocol's: ConsumerGroupHeartbeat with --group-protocol consumer)."""
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
                if o["step"] == step and o["op"] == heartbeat and o["kind"] == "request"
            ),
            None,
        )
        out.append(
            {
                "members": members,
                "held": bool(g.get((step, "wave_ok"), (0, 0))[0]),
                "server_rss_kib": rss,
                "server_rss_baseline_kib": base,
                "rss_per_member_kib": rounded((rss - base) / members, 3) if rss and base else None,
                "client_connections": g.get((step, "connections"), (None, None))[1],
                "heartbeat_p99_ms": hb["p99_ms"] if hb else None,
                "heartbeat_errors": hb["errors"] if hb else None,
            }
        )
    return out
