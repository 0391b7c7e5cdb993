"""The classic records of `__consumer_offsets`: offset commits and classic group metadata.

kafka-python's generated classes, built from the schemas in protocol/schemas. This module is
deferred (see protocol/__init__.py): the classes are built when a record is first encoded or
decoded through them, not when a server starts. records.py encodes and decodes with them.
"""

from __future__ import annotations

from kafka.protocol.api_data import ApiData
from minicoord.protocol import schemas


class OffsetCommitKey(ApiData, load_json=schemas):
    pass


class OffsetCommitValue(ApiData, load_json=schemas):
    pass


class GroupMetadataKey(ApiData, load_json=schemas):
    pass


class GroupMetadataValue(ApiData, load_json=schemas):
    pass
