"""API key → kafka-python's generated request/response classes and their schema versions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from minicoord.protocol.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int

    def request_flexible(self, version: int) -> bool:
        return bool(self.request.flexible_version_q(version))

    def response_flexible(self, version: int) -> bool:
        return bool(self.response.flexible_version_q(version))


def _spec(request: Any, response: Any) -> ApiSpec:
    # kafka-python widens every request's minimum to 0 for its own client-side use; the
    # schema's own validVersions is what the field layouts are correct for.
    low, high = request._valid_versions
    return ApiSpec(
        request.API_KEY, request.name.removesuffix("Request"), request, response, low, high
    )


SPECS: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _spec(ApiVersionsRequest, ApiVersionsResponse),
        _spec(MetadataRequest, MetadataResponse),
        _spec(FindCoordinatorRequest, FindCoordinatorResponse),
        _spec(CreateTopicsRequest, CreateTopicsResponse),
        _spec(ListOffsetsRequest, ListOffsetsResponse),
        _spec(FetchRequest, FetchResponse),
        _spec(ProduceRequest, ProduceResponse),
        _spec(JoinGroupRequest, JoinGroupResponse),
        _spec(SyncGroupRequest, SyncGroupResponse),
        _spec(HeartbeatRequest, HeartbeatResponse),
        _spec(LeaveGroupRequest, LeaveGroupResponse),
        _spec(OffsetCommitRequest, OffsetCommitResponse),
        _spec(OffsetFetchRequest, OffsetFetchResponse),
        _spec(DescribeGroupsRequest, DescribeGroupsResponse),
        _spec(ListGroupsRequest, ListGroupsResponse),
        _spec(DeleteGroupsRequest, DeleteGroupsResponse),
        _spec(OffsetDeleteRequest, OffsetDeleteResponse),
        _spec(InitProducerIdRequest, InitProducerIdResponse),
        _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        _spec(DeleteTopicsRequest, DeleteTopicsResponse),
        _spec(CreatePartitionsRequest, CreatePartitionsResponse),
        _spec(DeleteRecordsRequest, DeleteRecordsResponse),
        _spec(DescribeConfigsRequest, DescribeConfigsResponse),
        _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        _spec(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
        _spec(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    )
}
