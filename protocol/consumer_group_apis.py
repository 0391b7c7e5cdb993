"""ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69): the KIP-848 messages
kafka-python 3.x does not ship, generated from our schemas (protocol/schemas/) the same way it
generates its own. tests/fuzz/test_consumer_group_wire.py checks them against traffic
captured from librdkafka (decoded and re-encoded byte for byte)."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from minicoord.protocol import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass
