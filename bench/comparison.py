"""minicoord against the other targets of the same run: ratios per step and operation."""

from __future__ import annotations

from typing import Any

from minicoord.bench.operation_stats import rounded


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
                "rate_ratio": div(mine["rate_per_s"], o["rate_per_s"]),
                "p50_ratio": div(mine["p50_ms"], o["p50_ms"]),
                "p99_ratio": div(mine["p99_ms"], o["p99_ms"]),
            }
        )
    return out
