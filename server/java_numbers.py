"""Numbers as Kafka's Java code reads them from text (config values, resource names)."""

from __future__ import annotations

import re

# What Java's Integer.parseInt / Long.parseLong and Double.parseDouble take, as Kafka's
# ConfigDef reads a number (trimmed first): Python's int() and float() also take `1_000`,
# `nan` and `inf`, which Kafka refuses. Both integer parsers take any Unicode decimal digit
# (Character.digit), as `\d` and int() do.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)


def java_integer(text: str) -> int:
    """ValueError unless Java would read `text` as an integer."""
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(text)
    return int(text)


def node_id(text: str) -> int | None:
    """`text` as Java's Integer.parseInt reads a node id (Kafka's ConfigHelper and
    RuntimeLoggerManager), None where it throws: not an integer, or outside 32 bits."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << 31) <= value < (1 << 31) else None


def java_double(text: str) -> float:
    """ValueError unless Java would read `text` as a double."""
    if not _JAVA_DOUBLE.fullmatch(text):
        raise ValueError(text)
    return float(text.rstrip("fFdD"))
