"""The log benchmark (`python -m minicoord.bench.log_bench`) end to end at a tiny scale: acked
commits from spawned load processes against a real server, then recovery and compaction of a
written offsets log. No figure is asserted; each measure must be there and count real work."""

from __future__ import annotations

import json

import pytest
from minicoord.bench import log_bench


def test_log_bench_measures_commits_recovery_and_compaction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = "--records 500 --keys 50 --seconds 0.5 --workers 1 --clients 2 --policies write"
    log_bench.main(args.split())
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    commits, recovery, compaction = results
    assert commits["measure"].endswith("log.flush.policy=write") and commits["commits"] > 0
    assert recovery["records"] == 500 and recovery["bytes"] > 0
    assert compaction["records_before"] == 500
    assert 0 < compaction["records_after"] < 500
