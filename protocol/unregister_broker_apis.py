"""UnregisterBroker (key 64, version 0, flexible): kafka-python 3.x does not ship it; generated
from our schemas (protocol/schemas/) as consumer_group_apis.py generates the KIP-848 ones."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from minicoord.protocol import schemas


class UnregisterBrokerRequest(ApiMessage, load_json=schemas):
    pass


class UnregisterBrokerResponse(ApiMessage, load_json=schemas):
    pass
