"""Which `__consumer_offsets` partition owns a group: Kafka's exact mapping."""

from __future__ import annotations


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + … over UTF-16 code units, wrapping at 32 bits."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (Java's Math.abs would leave it negative).
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions
