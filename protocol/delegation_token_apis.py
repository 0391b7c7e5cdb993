"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41): messages kafka-python 3.x does not ship, generated from our
schemas (protocol/schemas/) as consumer_group_apis.py generates the KIP-848 ones. Versions
1-3 (1-2 for renew and expire): Kafka 4 dropped the v0 of each (KIP-896)."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from minicoord.protocol import schemas


class CreateDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class CreateDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class RenewDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class RenewDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class ExpireDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class ExpireDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class DescribeDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class DescribeDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass
