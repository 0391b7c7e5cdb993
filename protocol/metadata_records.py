"""Cluster metadata records: what the node persists about topics, in KRaft's own format.

Kafka's controller keeps topics, their partitions and configs, and producer id blocks as
records in `__cluster_metadata`. minicoord writes the same records to a log of the same name
(on the one log engine): each record has a null key and a value framed as KRaft frames it,

    unsigned varint frame version (1), unsigned varint api key, unsigned varint version,
    then the record body (flexible encoding),

so the topic layer can be rebuilt by replaying them at start.
"""

from __future__ import annotations

import io
from typing import Any

from kafka.protocol.api_data import ApiData
from minicoord.protocol import schemas
from minicoord.protocol.headers import MalformedHeader, read_uvarint, write_uvarint

FRAME_VERSION = 1
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32


class TopicRecord(ApiData, load_json=schemas):
    pass


class PartitionRecord(ApiData, load_json=schemas):
    pass


class ConfigRecord(ApiData, load_json=schemas):
    pass


class RemoveTopicRecord(ApiData, load_json=schemas):
    pass


class ProducerIdsRecord(ApiData, load_json=schemas):
    pass


class AccessControlEntryRecord(ApiData, load_json=schemas):
    pass


class RemoveAccessControlEntryRecord(ApiData, load_json=schemas):
    pass


class UserScramCredentialRecord(ApiData, load_json=schemas):
    pass


class RemoveUserScramCredentialRecord(ApiData, load_json=schemas):
    pass


class ClientQuotaRecord(ApiData, load_json=schemas):
    pass


class FeatureLevelRecord(ApiData, load_json=schemas):
    pass


# The version of each record type minicoord writes.
WRITTEN_VERSION: dict[type, int] = {
    TopicRecord: 0,
    PartitionRecord: 0,
    ConfigRecord: 0,
    RemoveTopicRecord: 0,
    ProducerIdsRecord: 0,
    AccessControlEntryRecord: 0,
    RemoveAccessControlEntryRecord: 0,
    UserScramCredentialRecord: 0,
    RemoveUserScramCredentialRecord: 0,
    ClientQuotaRecord: 0,
    FeatureLevelRecord: 0,
}
BY_API_KEY: dict[int, type] = {cls.json["apiKey"]: cls for cls in WRITTEN_VERSION}


def encode(record: Any) -> bytes:
    """A record's framed value, ready to append (its key is null)."""
    cls = type(record)
    version = WRITTEN_VERSION[cls]
    body = record.encode(version=version, header=False)
    frame = write_uvarint(FRAME_VERSION) + write_uvarint(cls.json["apiKey"])
    return frame + write_uvarint(version) + body


def decode(value: bytes) -> Any:
    """A framed value back to its record; ValueError for a frame or type we do not know."""
    try:
        frame, pos = read_uvarint(value, 0)
        api_key, pos = read_uvarint(value, pos)
        version, pos = read_uvarint(value, pos)
    except MalformedHeader as exc:
        raise ValueError(str(exc)) from None
    if frame != FRAME_VERSION:
        raise ValueError(f"unknown metadata record frame version {frame}")
    cls = BY_API_KEY.get(api_key)
    if cls is None:
        raise ValueError(f"unknown metadata record type {api_key}")
    data = io.BytesIO(value[pos:])
    record = cls.decode(data, version=version, header=False)
    if data.read(1):
        raise ValueError(f"garbage after a {cls.__name__}")
    return record
