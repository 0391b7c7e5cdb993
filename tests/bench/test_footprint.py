"""`minicoord bench footprint` end to end at a tiny scale: real servers started and timed,
their RSS read from /proc, members joined over 127.0.0.1 to minicoord and to a peer. No
figure is asserted: what is checked is that every measure was taken, and that the members it
counts really joined."""

from __future__ import annotations

import re

import pytest
from kafka import KafkaAdminClient
from minicoord.bench.cli import main as bench_main
from minicoord.server.process import start_server_process


def test_footprint_measures_start_up_and_memory_beside_the_floor_and_a_peer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A second minicoord stands in for the peer, so the members it got can be counted.
    peer = start_server_process({}, [("bench", 64)], extra_args=["--log-level", "WARNING"])
    try:
        args = ["footprint", "--starts", "2", "--members", "30", "--group-size", "10"]
        args += ["--joins", "by-group"]
        args += ["--compare-bootstrap", peer.bootstrap, "--compare-pid", str(peer.proc.pid)]
        assert bench_main(args) == 0
        admin = KafkaAdminClient(bootstrap_servers=peer.bootstrap)
        try:
            listed = [g["group_id"] for g in admin.list_groups()]
            groups = [g for g in listed if g.startswith("footprint-")]
            sizes = sorted(len(d["members"]) for d in admin.describe_groups(groups).values())
        finally:
            admin.close()
    finally:
        peer.stop()
    # The warm-up group, then three of ten (one, then two): their sessions outlive the closed
    # connections.
    assert sizes == [10, 10, 10, 10]
    out = capsys.readouterr().out
    starts = re.findall(r"^  (minicoord|bare uvloop) +([\d.]+) ms \(([\d.]+)-([\d.]+)\)", out, re.M)
    assert [name for name, *_ in starts] == ["minicoord", "bare uvloop"]
    assert all(float(lo) <= float(mid) <= float(hi) for _, mid, lo, hi in starts)
    assert re.search(r"minicoord / bare uvloop: [\d.]+$", out, re.M)
    idle = re.findall(r"^  (minicoord|bare uvloop) +([\d,]+) KiB$", out, re.M)
    assert [name for name, _ in idle] == ["minicoord", "bare uvloop"]
    assert all(int(kib.replace(",", "")) > 10_000 for _, kib in idle)  # an interpreter, at least
    each = (
        r"^  (\S+(?: uvloop)?) +([\d,]+) -> ([\d,]+) -> ([\d,]+) KiB: (-?[\d.]+) KiB each, "
        r"(-?[\d.]+) KiB each of the second half"
    )
    per = re.findall(each, out, re.M)
    assert [name for name, *_ in per] == ["minicoord", "peer", "bare uvloop"]


def test_footprint_refuses_nonsense_sizes() -> None:
    with pytest.raises(SystemExit):
        bench_main(["footprint", "--members", "0"])
