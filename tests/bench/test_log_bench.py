"""The log benchmark (`python -m minicoord.bench.log_bench`) end to end at a tiny scale: acked
commits from spawned load processes against a real server, then recovery, requests to a server
loading it, and compaction of a written offsets log. No figure is asserted; each measure must
be there and count real work."""

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
    commits, recovery, loading, compaction = results
    assert commits["measure"].endswith("log.flush.policy=write") and commits["commits"] > 0
    assert recovery["records"] == 500 and recovery["bytes"] > 0
    # 500 records load before the first round trip, most likely: only the after part counts.
    assert loading["records"] == 500 and loading["load"].endswith(" ms")
    assert loading["after"]["round_trips"] > 10 and loading["after"]["median_ms"] > 0
    assert compaction["records_before"] == 500
    assert 0 < compaction["records_after"] < 500


def test_log_bench_runs_only_the_measures_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    log_bench.main(["--records", "300", "--keys", "30", "--policies", "--measures", "loading"])
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["measure"] for r in results] == [
        "ApiVersions round trips while one partition loads, and after"
    ]
    assert results[0]["records"] == 300
