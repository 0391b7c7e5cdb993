"""`__transaction_state` records: Kafka's TransactionLogKey and TransactionLogValue.

kafka-python's generated classes, built from the schemas in protocol/schemas. The key is
version 0 (the transactional id); the value is written at version 0, as Kafka writes it below
transaction version 2, and read at version 0 or 1. Each starts with its version (int16), as
Kafka's MessageUtil.toVersionPrefixedBytes writes them. A tombstone (no value) removes a
transactional id. Loaded with the transaction coordinator, not at start.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka.protocol.api_data import ApiData
from minicoord.protocol import schemas

# Kafka's TransactionState ids (the TransactionStatus field).
STATUS_IDS = {
    "Empty": 0,
    "Ongoing": 1,
    "PrepareCommit": 2,
    "PrepareAbort": 3,
    "CompleteCommit": 4,
    "CompleteAbort": 5,
    "Dead": 6,
    "PrepareEpochFence": 7,
}
STATUS_NAMES = {number: name for name, number in STATUS_IDS.items()}
VALUE_VERSION = 0


class TransactionLogKey(ApiData, load_json=schemas):
    pass


class TransactionLogValue(ApiData, load_json=schemas):
    pass


def encode_key(transactional_id: str) -> bytes:
    return bytes(TransactionLogKey(transactional_id=transactional_id).encode(version=0))


def decode_key(key: bytes) -> str:
    return str(TransactionLogKey.decode(key).transactional_id)


def encode_value(
    producer_id: int,
    epoch: int,
    timeout_ms: int,
    status: str,
    partitions: Iterable[tuple[str, int]] | None,
    last_update_ms: int,
    start_ms: int,
) -> bytes:
    """The value Kafka writes: partitions grouped by topic, null for an Empty transaction."""
    listed = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(partitions):
            by_topic.setdefault(topic, []).append(index)
        schema = TransactionLogValue.PartitionsSchema
        listed = [schema(topic=t, partition_ids=ids) for t, ids in by_topic.items()]
    return bytes(
        TransactionLogValue(
            producer_id=producer_id,
            producer_epoch=epoch,
            transaction_timeout_ms=timeout_ms,
            transaction_status=STATUS_IDS[status],
            transaction_partitions=listed,
            transaction_last_update_timestamp_ms=last_update_ms,
            transaction_start_timestamp_ms=start_ms,
        ).encode(version=VALUE_VERSION)
    )


def decode_value(value: bytes) -> TransactionLogValue:
    return TransactionLogValue.decode(value)


def partitions_of(value: TransactionLogValue) -> set[tuple[str, int]]:
    return {
        (p.topic, index) for p in value.transaction_partitions or () for index in p.partition_ids
    }
