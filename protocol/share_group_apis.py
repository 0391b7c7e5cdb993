"""ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79),
and DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (90-92): the
KIP-932 share-group messages kafka-python 3.x does not ship, generated from our schemas
(protocol/schemas/) as consumer_group_apis.py generates the KIP-848 ones."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from minicoord.protocol import schemas


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class ShareFetchRequest(ApiMessage, load_json=schemas):
    pass


class ShareFetchResponse(ApiMessage, load_json=schemas):
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas):
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas):
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass
