"""`__share_group_state` records: Kafka's ShareSnapshotKey and ShareSnapshotValue.

kafka-python's generated classes, built from the schemas in protocol/schemas. Each starts with
its version (int16), as Kafka's coordinator records do: the key's is its record type (0, a
snapshot), the value's 0. A tombstone (no value) removes a share partition's state. Loaded with
the first share partition kept, not at start.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_data import ApiData
from minicoord.protocol import schemas

SNAPSHOT = 0  # the key's record type, ShareSnapshotKey
# (first offset, last offset, delivery state, delivery count): Kafka's StateBatch.
StateBatch = tuple[int, int, int, int]


class ShareSnapshotKey(ApiData, load_json=schemas):
    pass


class ShareSnapshotValue(ApiData, load_json=schemas):
    pass


def encode_key(group: str, topic_id: uuid.UUID, partition: int) -> bytes:
    key = ShareSnapshotKey(group_id=group, topic_id=topic_id, partition=partition)
    return bytes(key.encode(version=SNAPSHOT))


def decode_key(key: bytes) -> tuple[str, uuid.UUID, int]:
    decoded: Any = ShareSnapshotKey.decode(key)
    return str(decoded.group_id), decoded.topic_id, int(decoded.partition)


def encode_value(
    start: int, batches: Iterable[StateBatch], done: int, created: int, written: int
) -> bytes:
    batch = ShareSnapshotValue.StateBatch
    value = ShareSnapshotValue(
        snapshot_epoch=0,
        state_epoch=0,
        leader_epoch=0,
        start_offset=start,
        delivery_complete_count=done,
        create_timestamp=created,
        write_timestamp=written,
        state_batches=[
            batch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
            for f, last, s, c in batches
        ],
    )
    return bytes(value.encode(version=0))


def decode_value(value: bytes) -> tuple[int, list[StateBatch]]:
    """(start offset, state batches)."""
    decoded: Any = ShareSnapshotValue.decode(value)
    return int(decoded.start_offset), [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in decoded.state_batches
    ]
