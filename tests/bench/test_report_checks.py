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
