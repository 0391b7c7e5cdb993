"""Plain-text tables for the terminal (`minicoord ctl`, `minicoord doctor`)."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value: object) -> str:
    """None reads as '-', as in kafka-consumer-groups' output."""
    return "-" if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns two spaces apart, the header in capitals; no trailing spaces."""
    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in text)]) for i, h in enumerate(headers)]
    lines = [[h.upper() for h in headers], *text]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )
