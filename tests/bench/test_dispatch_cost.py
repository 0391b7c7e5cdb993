"""`minicoord bench dispatch` at a tiny scale: real members join over 127.0.0.1, then their
requests are read on the server's loop; every API is answered without an error and reports a
cost. No figure is asserted."""

from __future__ import annotations

import re

import pytest
from minicoord.bench.cli import main as bench_main


def test_dispatch_reports_each_api_answered_without_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench_main(["dispatch", "--per-turn", "3", "--turns", "20"]) == 0
    out = capsys.readouterr().out
    for api in ("heartbeat", "commit", "cghb"):
        line = re.search(rf"^{api}: 3 per turn, 20 turns: ([\d.]+) us .*answers: (.*)$", out, re.M)
        assert line is not None, out
        assert float(line.group(1)) > 0
        assert line.group(2) == "no errors"


def test_dispatch_names_an_unknown_api() -> None:
    with pytest.raises(SystemExit):
        bench_main(["dispatch", "--api", "produce"])
