"""`minicoord bench` checks that must fail loudly, through Spark local mode at toy sizes:
offsets not verified, assignments checked against the topic as it is. The server under test
runs embedded in this process (`--bootstrap`), so that faults can be injected into it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from minicoord.bench.cli import main
from minicoord.testing import running


def test_commit_with_every_commit_refused_is_not_verified(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """No OffsetCommit acknowledged: OffsetFetch had nothing to verify, which is a failed
    check (exit 1), not a passed one; and refused commits are no throughput."""
    out = tmp_path / "commit"
    with running() as server:
        server.control.fail_next("OffsetCommit", 1_000_000, "COORDINATOR_LOAD_IN_PROGRESS")
        argv = ["commit", "--bootstrap", server.bootstrap, "--members", "4", "--group-size", "2"]
        argv += ["--duration-s", "1", "--tasks", "1", "--out", str(out), "--no-progress"]
        assert main(argv) == 1

    results = json.loads((out / "summary.json").read_text())["results"]
    assert results["offsets_verified"] is False
    assert "minicoord: no OffsetCommit was acknowledged" in results["offsets_not_verified"]
    assert "## offsets_verified\n\n```json\nfalse\n```" in (out / "results.md").read_text()
    (step,) = results["steps"]
    assert step["answers"] == step["errors"] > 0, step
    assert step["error_codes"] == [f"COORDINATOR_LOAD_IN_PROGRESS {step['errors']}"]
    assert step["achieved_per_s"] == 0 and step["per_server_cpu_second"] in (0, None), step
    assert results["saturation"]["minicoord"]["max_achieved_per_s"] == 0
    said = [line for line in capfd.readouterr().err.splitlines() if "ERRORS" in line]
    assert said == [
        "minicoord bench: ERRORS in timed steps (achieved_per_s and the ratios count only "
        f"error-free answers): minicoord back-to-back: {step['errors']:,} of "
        f"{step['answers']:,} (COORDINATOR_LOAD_IN_PROGRESS {step['errors']})"
    ]


def test_cold_join_against_an_existing_topic_checks_the_topic_as_it_is(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The README's lean peer (`--topic bench:64`) as --bootstrap, beside a server without
    the topic: each target's groups are checked against its own topic, the peer's 64
    partitions said in one line, and correct assignments are not violations."""
    out = tmp_path / "cold"
    with running(topics=[("bench", 64)]) as peer, running() as fresh:
        argv = ["cold-join", "--bootstrap", peer.bootstrap, "--compare-bootstrap", fresh.bootstrap]
        argv += ["--groups", "2", "--members", "2", "--tasks", "1", "--out", str(out)]
        assert main([*argv, "--no-progress"]) == 0
    err = capfd.readouterr().err
    said = [line for line in err.splitlines() if "already existed" in line]
    assert said == [
        f"minicoord bench: topic bench already existed on minicoord ({peer.bootstrap}) with 64 "
        "partitions, not 2: its members are assigned 64, and checked against that"
    ], err

    summary = json.loads((out / "summary.json").read_text())
    groups = {g["target"]: g for g in summary["results"]["groups"]}
    assert set(groups) == {"minicoord", "other"}
    for g in groups.values():
        assert g["assignment_disjoint_and_complete"] == 2 and g["assignment_violations"] == 0, g
    assert summary["partitions_by_step"] == {
        "minicoord": {"cold-join": 64},
        "other": {"cold-join": 2},
    }
