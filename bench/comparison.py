"""minicoord against the other targets of the same run: ratios per step and operation, their
medians over rounds (--compare-rounds), and the head-to-head scenario's table."""

from __future__ import annotations

import statistics
from typing import Any

from minicoord.bench.operation_stats import rounded
from minicoord.bench.task_run import split_round


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
            return rounded(a / b, 3) if a is not None and b else None

        out.append(
            {
                "versus": o["target"],
                "step": o["step"],
                "op": o["op"],
                # Error-free answers: a target answering errors fast does not lead.
                "rate_ratio": div(mine["ok_per_s"], o["ok_per_s"]),
                "p50_ratio": div(mine["p50_ms"], o["p50_ms"]),
                "p99_ratio": div(mine["p99_ms"], o["p99_ms"]),
            }
        )
    return out


def _median(values: list[float]) -> float | None:
    return rounded(float(statistics.median(values)), 3) if values else None


def round_medians(rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
    """Per (versus, step, op) over the rounds of a run whose targets took turns: each
    metric's median of the per-round ratios, with the lowest and highest. A ratio of two
    figures measured a minute apart on a shared machine drifts far less than either figure,
    and the median of a few rounds is robust to the one round something else ran in."""
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        step, round_ = split_round(row["step"])
        if round_:
            grouped.setdefault((row["versus"], step, row.get("op", "")), []).append(row)
    out = []
    for (versus, step, op), mine in sorted(grouped.items()):
        entry: dict[str, Any] = {"versus": versus, "step": step}
        if op:
            entry["op"] = op
        entry["rounds"] = len(mine)
        for metric in metrics:
            values = sorted(r[metric] for r in mine if r.get(metric) is not None)
            entry[f"{metric}_median"] = _median(values)
            entry[f"{metric}_min"] = values[0] if values else None
            entry[f"{metric}_max"] = values[-1] if values else None
        out.append(entry)
    return out


# What head-to-head compares: (measure, step, where the figure is, higher is better).
HEAD_TO_HEAD = (
    ("Heartbeats/s", "heartbeat", ("op", "Heartbeat", "ok_per_s"), True),
    ("OffsetCommits/s", "commit", ("op", "OffsetCommit", "ok_per_s"), True),
    ("Heartbeat p99 ms", "heartbeat", ("op", "Heartbeat", "p99_ms"), False),
    ("OffsetCommit p99 ms", "commit", ("op", "OffsetCommit", "p99_ms"), False),
    (
        "join: first JoinGroup -> all assigned, ms",
        "join",
        ("group", "", "time_to_stable_max_ms"),
        False,
    ),
)


def head_to_head(
    ops: list[dict[str, Any]], groups: list[dict[str, Any]], heartbeat: str = "Heartbeat"
) -> list[dict[str, Any]]:
    """One row per measure, other target and round: minicoord's figure, the other's, and
    their ratio (minicoord / other: above 1 is better for rates, below 1 for times); then
    one row per measure and other target with the median of the rounds' ratios. `heartbeat`
    names the members' heartbeat (ConsumerGroupHeartbeat with --group-protocol consumer)."""
    figures: dict[tuple[str, str, str, int], float] = {}  # (measure, target, step, round)
    for measure, step, (source, op, field), _ in HEAD_TO_HEAD:
        op = heartbeat if op == "Heartbeat" else op
        items = (
            [o for o in ops if o["op"] == op and o["kind"] == "request"]
            if source == "op"
            else groups
        )
        for item in items:
            base, round_ = split_round(item["step"])
            if base == step and item.get(field) is not None:
                figures[(measure, item["target"], step, round_)] = item[field]
    out = []
    for measure, step, _, higher_better in HEAD_TO_HEAD:
        others = sorted({t for m, t, _, _ in figures if m == measure and t != "minicoord"})
        for other in others:
            ratios_: list[float] = []
            mines: list[float] = []
            theirs_: list[float] = []
            rounds = sorted({r for m, t, _, r in figures if m == measure and t == other})
            for round_ in rounds:
                mine = figures.get((measure, "minicoord", step, round_))
                theirs = figures.get((measure, other, step, round_))
                ratio = rounded(mine / theirs, 3) if mine is not None and theirs else None
                if ratio is not None:
                    ratios_.append(ratio)
                mines += [mine] if mine is not None else []
                theirs_ += [theirs] if theirs is not None else []
                out.append(
                    {
                        "measure": measure,
                        "versus": other,
                        "round": round_,
                        "minicoord": mine,
                        "other": theirs,
                        "ratio": ratio,
                        "better": "higher" if higher_better else "lower",
                    }
                )
            out.append(
                {
                    "measure": measure,
                    "versus": other,
                    "round": "median",
                    "minicoord": _median(mines),
                    "other": _median(theirs_),
                    "ratio": _median(ratios_),
                    "better": "higher" if higher_better else "lower",
                }
            )
    return out
