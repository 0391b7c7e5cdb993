"""serve's text log lines are the stock formatter's, though their date part is made once per
second: one formatter fed records in any order of time writes what logging.Formatter does."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st
from minicoord.server.logfmt import TEXT_FORMAT, TextFormatter

STOCK = logging.Formatter(TEXT_FORMAT)
SHARED = TextFormatter()  # its cache carries over from example to example, as in a server


def record(created: float) -> logging.LogRecord:
    r = logging.LogRecord("minicoord.group", logging.INFO, "", 0, "member %s left", ("m",), None)
    r.created = created
    r.msecs = (created - int(created)) * 1000
    return r


# 2001 to 2286, as seconds; runs of times within one second and across its edges.
times = st.lists(st.floats(1e9, 1e10, allow_nan=False), min_size=1, max_size=8)


@given(times, st.floats(0, 2.5))
def test_lines_equal_the_stock_formatters(starts: list[float], step: float) -> None:
    for start in starts:
        for created in (start, start + step / 3, start + step):
            assert SHARED.format(record(created)) == STOCK.format(record(created))
