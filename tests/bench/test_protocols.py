"""`minicoord bench protocols` and `--group-protocol consumer` end to end through Spark local
mode, at toy sizes, against the minicoord server each run starts on 127.0.0.1.

No timing is asserted: only what the members owned, that both protocols are measured and
reported, and that the figures exist. The server's consumer heartbeat interval is set short
(100 ms) so that the consumer protocol's rounds, paced by heartbeats, take little wall time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from minicoord.bench.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAST_HEARTBEAT = ["--server-config", "group.consumer.heartbeat.interval.ms=100"]


def request_counts(spark: Any, raw: Path) -> dict[tuple[str, str], int]:
    """(step, op) -> requests sent, from the raw rows."""
    df = spark.read.parquet(str(raw)).filter("kind = 'request'")
    return {(r["step"], r["op"]): r["count"] for r in df.groupBy("step", "op").count().collect()}


def test_protocols_measures_both_side_by_side(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "protocols"
    argv = ["protocols", "--sizes", "2,4", "--members", "3", "--duration-s", "0.3"]
    argv += ["--compare-rounds", "1", "--tasks", "1", *FAST_HEARTBEAT]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0

    summary = json.loads((out / "summary.json").read_text())
    results = summary["results"]
    # Settle: every size measured under both protocols, each partition owned exactly once.
    settle = {e["group_size"]: e for e in results["protocols_settle"]}
    assert sorted(settle) == [2, 4]
    for entry in settle.values():
        assert entry["classic_ms"] > 0 and entry["consumer_ms"] > 0, entry
        assert entry["classic_assignment_violations"] == 0
        assert entry["consumer_assignment_violations"] == 0
    assert all(g["assignment_violations"] == 0 for g in results["groups"])

    # Newcomer: 3 old members with 10 partitions each, one newcomer.
    newcomer = {r["protocol"]: r for r in results["protocols_newcomer"] if r["round"] != "median"}
    assert set(newcomer) == {"classic", "consumer"}
    consumer, classic = newcomer["consumer"], newcomer["classic"]
    for row in (consumer, classic):
        assert row["old_members"] == 3 and row["not_resettled"] == 0, row
        # Its share of 30 partitions among 4 members, owned at the end.
        assert row["newcomer_share"] in (7, 8), row
        assert row["newcomer_share_ms"] is not None and row["newcomer_share_intervals"] > 0
        assert row["heartbeat_interval_ms"] == 100
    # Consumer protocol: every old member kept partitions and was never without them, nor
    # ever without any partition; only the newcomer's share moved.
    assert consumer["members_that_kept_partitions"] == 3
    assert consumer["members_ever_without_kept"] == 0
    assert consumer["without_kept_max_ms"] == 0
    assert consumer["members_that_owned_nothing"] == 0
    assert consumer["partitions_moved"] == consumer["newcomer_share"]
    # Classic (eager): every old member gave everything up before it rejoined.
    assert classic["members_ever_without_kept"] == 3
    assert classic["without_kept_max_ms"] > 0

    # Heartbeats: both protocols' back-to-back rates, with no errors, and their ratio.
    beats = {r["protocol"]: r for r in results["protocols_heartbeat"]}
    for protocol in ("classic", "consumer"):
        assert beats[protocol]["achieved_per_s"] > 0 and beats[protocol]["errors"] == 0
    assert beats["both"]["consumer_over_classic"] > 0
    claims = results["protocols_claims"]
    assert len(claims) == 4 and all(isinstance(c["met"], bool) for c in claims)
    # Claims that hold by construction of the protocol, whatever the machine's speed.
    zero_gap = [c for c in claims if "unaffected partitions" in c["claim"]]
    assert zero_gap and zero_gap[0]["met"] is True

    # Each protocol spoke its own requests, and only its own.
    counts = request_counts(spark, out / "raw.parquet")
    assert counts[("consumer heartbeat", "ConsumerGroupHeartbeat")] > 0
    assert counts[("classic heartbeat", "Heartbeat")] > 0
    assert counts[("consumer size=4", "ConsumerGroupHeartbeat")] >= 4
    assert counts[("classic size=4", "JoinGroup")] >= 4
    assert not [k for k in counts if k[0].startswith("consumer") and k[1] == "JoinGroup"]
    assert not [
        k for k in counts if k[0].startswith("classic") and k[1] == "ConsumerGroupHeartbeat"
    ]

    # The report: both protocols in the text, and the plot.
    text = (out / "results.md").read_text()
    for heading in ("protocols_settle", "protocols_newcomer", "protocols_heartbeat"):
        assert f"## {heading}" in text
    assert "classic" in text and "consumer" in text
    plot = (out / "protocols_classic_vs_consumer.png").read_bytes()
    assert plot.startswith(PNG_MAGIC) and len(plot) > 5_000


def test_cold_join_with_the_consumer_protocol_settles(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "cold"
    argv = ["cold-join", "--groups", "2", "--members", "3", "--tasks", "2"]
    argv += ["--group-protocol", "consumer", *FAST_HEARTBEAT]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0

    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["group_protocol"] == "consumer"
    (group,) = summary["results"]["groups"]
    assert group["groups"] == 2 and group["groups_with_failures"] == 0
    assert group["assignment_violations"] == 0 and group["time_to_stable_max_ms"] > 0

    df = spark.read.parquet(str(out / "raw.parquet"))
    counts = {(r["kind"], r["op"]): r["count"] for r in df.groupBy("kind", "op").count().collect()}
    assert counts[("phase", "join")] == 6
    assert counts[("request", "ConsumerGroupHeartbeat")] >= 6
    assert ("request", "JoinGroup") not in counts and ("request", "SyncGroup") not in counts
    # Every member ends settled in its group, and the 3 partitions of each group are owned
    # once each.
    owned = df.filter("kind = 'assignment'").groupBy("group_id", "op").count().collect()
    assert len(owned) == 6 and all(r["count"] == 1 for r in owned)
    assert group["assignment_disjoint_and_complete"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["protocols", "--group-protocol", "consumer"], "drop --group-protocol"),
        (["data", "--group-protocol", "consumer"], "librdkafka"),
        (["heartbeat", "--group-protocol", "consumer", "--compare"], "echo server"),
        (
            ["rejoin", "--group-protocol", "consumer", "--heartbeat-interval-ms", "100"],
            "group.consumer.heartbeat.interval.ms",
        ),
        (["cold-join", "--group-protocol", "consumer", "--assignor", "range"], "--server-assignor"),
        (["cold-join", "--server-assignor", "range"], "--group-protocol consumer"),
    ],
)
def test_options_a_protocol_cannot_honour_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--no-progress"])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
