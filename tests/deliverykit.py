"""What the data-path tests of every stock client share: the messages they produce, and the
check that what a consumer group read back is exactly what was produced.

A message is keyed, carries headers, and its value is binary (or empty, or null). The check
does not trust the producer's partitioner to be any particular one: it learns each key's
partition from what was consumed, then requires that every key lived in one partition, that
each partition holds exactly its keys' messages in the order they were produced, at offsets
0, 1, 2, … with nothing missing, repeated or out of place.

It lives at the top of tests/ (on sys.path through tests/conftest.py) so that tests/clients
and tests/matrix share one definition of "delivered correctly". Test helpers are imported by
their bare module name, so its name must be unique across tests/ (tests/data has a datakit).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Message:
    key: bytes
    value: bytes | None
    headers: Headers

    def to_json(self) -> dict[str, Any]:
        """Base64 for the bytes, so that binary keys, values and headers survive JSON."""
        return {
            "key": b64(self.key),
            "value": None if self.value is None else b64(self.value),
            "headers": [[k, b64(v)] for k, v in self.headers],
        }


@dataclass(frozen=True)
class Consumed:
    """One record as a consumer handed it to the application."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    @classmethod
    def from_json(cls, event: Mapping[str, Any]) -> Consumed:
        """The inverse of Message.to_json, for the records a Node consumer printed."""
        value = event["value"]
        key = event["key"]
        return cls(
            int(event["partition"]),
            int(event["offset"]),
            None if key is None else unb64(key),
            None if value is None else unb64(value),
            tuple((str(k), unb64(v)) for k, v in event["headers"]),
        )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def keyed_messages(count: int, keys: int = 23, tag: str = "m") -> list[Message]:
    """`count` messages over `keys` keys (enough for any partitioner to use all 6 partitions).

    Every value is distinct and binary (a NUL and a byte no UTF-8 text holds); one message in
    50 has a null value (a tombstone) and one in 41 an empty one, which a client must keep
    apart. The headers repeat a key (adjacent, so that clients whose API turns headers into an
    object of arrays, like kafkajs, still keep their order), carry binary and empty values, and
    no key looks like an integer (JavaScript orders those first in an object).
    """
    messages = []
    for i in range(count):
        if i % 50 == 49:
            value: bytes | None = None
        elif i % 41 == 40:
            value = b""
        else:
            value = f"{tag}-value-{i}-".encode() + bytes([0, 0xFF, i % 256])
        headers: Headers = (
            ("trace", f"{tag}-{i}".encode()),
            ("tag", b"first"),
            ("tag", bytes([i % 256, 0x80])),
            ("empty", b""),
        )
        messages.append(Message(f"key-{i % keys}".encode(), value, headers))
    return messages


def check_delivery(
    produced: Sequence[Message],
    consumed: Iterable[Consumed],
    partitions: int,
    reported: Sequence[tuple[int, int]] | None = None,
) -> dict[int, int]:
    """Assert `consumed` (in the order the consumer delivered it) is exactly `produced`, in
    produce order per partition; return each partition's end offset (its message count).

    `reported`, when the producer gave one, is each message's (partition, offset) from its
    delivery report, in produce order: it must be where the message was consumed from.
    """
    got = list(consumed)
    assert len(got) == len(produced), f"consumed {len(got)} records, produced {len(produced)}"
    by_partition: dict[int, list[Consumed]] = {p: [] for p in range(partitions)}
    key_partition: dict[bytes | None, int] = {}
    for record in got:
        assert 0 <= record.partition < partitions, record
        by_partition[record.partition].append(record)
        first = key_partition.setdefault(record.key, record.partition)
        assert first == record.partition, f"key {record.key!r} in partitions {first} and {record}"
    assert set(key_partition) == {m.key for m in produced}, "keys consumed differ from produced"
    ends: dict[int, int] = {}
    for p, records in by_partition.items():
        offsets = [r.offset for r in records]
        assert offsets == list(range(len(records))), (
            f"partition {p}: offsets not 0..{len(records) - 1} in order: {offsets[:20]}…"
        )
        expected = [m for m in produced if key_partition[m.key] == p]
        actual = [Message(r.key or b"", r.value, r.headers) for r in records]
        for offset, (want, have) in enumerate(zip(expected, actual, strict=True)):
            assert have == want, f"partition {p} offset {offset}: got {have}, produced {want}"
        ends[p] = len(records)
    # Every partition got keys: the test really is about a multi-partition topic.
    assert all(ends.values()), f"a partition got no messages: {ends}"
    if reported is not None:
        where = {(r.key, r.value, r.headers): (r.partition, r.offset) for r in got}
        assert len(reported) == len(produced)
        for message, report in zip(produced, reported, strict=True):
            assert where[(message.key, message.value, message.headers)] == report, message
    return ends


def java_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit wrap), as Kafka hashes group ids."""
    data = text.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int = 50) -> int:
    """The `__consumer_offsets` partition holding a group's records: abs(hash) % partitions
    (Kafka's Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def read_to_end(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 15
) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of the topic's partitions, each read with confluent-kafka
    to its end as `isolation` sees it (read_committed: the last stable offset), partitions
    in turn as the consumer delivers them; fails if an end is not reached in `timeout_s`."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[tuple[bytes | None, bytes | None]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.2) + 1):
        if len(ended) == partitions or time.monotonic() > deadline:
            break
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
            ended.add(message.partition())
            continue
        records.append((message.key(), message.value()))
    consumer.close()
    assert len(ended) == partitions, f"{topic} {isolation}: not read to its end: {records}"
    return records


def values_to_end(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[str]:
    """The values `read_to_end` reads, decoded, in the order read."""
    return [
        v.decode() if v is not None else ""
        for _, v in read_to_end(bootstrap, topic, partitions, isolation)
    ]
