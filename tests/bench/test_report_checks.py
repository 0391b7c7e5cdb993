"""The report's verdicts, without Spark: which checks count as failed, and how the exit
status reads them."""

from __future__ import annotations

from typing import Any

from minicoord.bench.cli import exit_status
from minicoord.bench.report import offsets_check


def verify(target: str, errors: int) -> dict[str, Any]:
    return {"target": target, "step": "verify", "kind": "phase", "op": "verify_offsets",
            "count": 1, "errors": errors}  # fmt: skip


def test_offsets_check_needs_acknowledged_offsets() -> None:
    assert offsets_check([], {}) == (None, None)
    assert offsets_check([verify("minicoord", 0)], {"minicoord": 8.0}) == (True, None)
    # Nothing acknowledged: nothing fetched, no mismatch, and still not verified.
    ok, why = offsets_check([verify("minicoord", 0)], {})
    assert ok is False and why is not None and "no OffsetCommit was acknowledged" in why
    ok, why = offsets_check([verify("minicoord", 0), verify("other", 0)], {"minicoord": 4})
    assert ok is False and why == "other: no OffsetCommit was acknowledged, so nothing was verified"
    ok, why = offsets_check([verify("minicoord", 1)], {"minicoord": 8.0})
    assert ok is False and why is not None and "other than acknowledged" in why


def summary(**results: Any) -> dict[str, Any]:
    return {"results": results}


def test_exit_status_fails_on_every_failed_check() -> None:
    assert exit_status(summary()) == 0
    assert exit_status(summary(offsets_verified=True, records_verified=True)) == 0
    assert exit_status(summary(offsets_verified=None)) == 0  # no check in this scenario
    assert exit_status(summary(offsets_verified=False)) == 1
    assert exit_status(summary(records_verified=False)) == 1
    bad = {"assignment_violations": 1, "groups_with_failures": 0}
    assert exit_status(summary(groups=[bad])) == 1


def test_results_md_shows_failed_checks() -> None:
    from minicoord.bench.report import markdown

    report = {
        "scenario": "commit",
        "parameters": {},
        "targets": {"minicoord": "127.0.0.1:9092"},
        "executors": [],
        "operations": [],
        "results": {
            "offsets_verified": False,
            "records_verified": False,
            "offsets_not_verified": "minicoord: why",
            "assignment_violation_examples": [],
        },
        "ratios": [],
        "ratio_medians": [],
        "plots": [],
    }
    text = markdown(report)
    for key in ("offsets_verified", "records_verified"):
        assert f"## {key}\n\n```json\nfalse\n```" in text, text
    assert "## offsets_not_verified" in text
    # Empty sections stay out.
    assert "## ratios" not in text and "## assignment_violation_examples" not in text


def op_row(target: str, count: int, errors: int, step: str = "back-to-back") -> dict[str, Any]:
    return {"target": target, "step": step, "kind": "request", "op": "Heartbeat",
            "count": count, "errors": errors, "rate_per_s": count / 2, "ok_per_s":
            (count - errors) / 2, "p50_ms": 1.0, "p99_ms": 2.0}  # fmt: skip


def test_ratios_count_error_free_answers_only() -> None:
    from minicoord.bench.comparison import head_to_head, ratios

    # minicoord answered 1,000 heartbeats, 600 of them REBALANCE_IN_PROGRESS; the other
    # server 800, all accepted: minicoord did half the other's work, not 1.25 times it.
    ops = [op_row("minicoord", 1000, 600), op_row("other", 800, 0)]
    (ratio,) = ratios(ops)
    assert ratio["rate_ratio"] == 0.5
    ops = [op_row("minicoord", 1000, 600, "heartbeat #1"), op_row("other", 800, 0, "heartbeat #1")]
    rows = [r for r in head_to_head(ops, []) if r["measure"] == "Heartbeats/s"]
    assert [(r["minicoord"], r["other"], r["ratio"]) for r in rows] == [
        (200.0, 400.0, 0.5),
        (200.0, 400.0, 0.5),
    ]


def test_step_errors_line() -> None:
    from minicoord.bench.load_stats import step_errors_line

    clean = {"target": "minicoord", "step": "rate=100", "answers": 100, "errors": 0}
    assert step_errors_line([clean]) is None
    bad = {"target": "minicoord", "step": "back-to-back", "answers": 66714, "errors": 22913,
           "error_codes": ["REBALANCE_IN_PROGRESS 22913"]}  # fmt: skip
    assert step_errors_line([clean, bad]) == (
        "ERRORS in timed steps (achieved_per_s and the ratios count only error-free answers): "
        "minicoord back-to-back: 22,913 of 66,714 (REBALANCE_IN_PROGRESS 22913)"
    )


def test_readme_counts_the_protocols_claims_the_code_makes() -> None:
    import re
    from pathlib import Path

    from minicoord.bench.protocol_stats import claims

    made = claims(
        [{"group_size": 10, "consumer_ms": 1.0, "classic_ms": 2.0}],
        [{"protocol": "consumer", "round": "median", "without_kept_max_ms": 0,
          "newcomer_share_intervals_max": 1}],
        [{"round": "median", "ConsumerGroupHeartbeat_per_s": 2, "Heartbeat_per_s": 1}],
    )  # fmt: skip
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    (said,) = re.findall(r"the (\w+) checks\s+\(`protocols_claims`", readme)
    words = {"three": 3, "four": 4, "five": 5}
    assert words[said] == len(made) == 4
