"""DescribeCluster (key 60), versions 0-2: the cluster id, controller and brokers.

Kafka 4's KafkaApis.handleDescribeCluster and AuthHelper.computeDescribeClusterResponse, on a
broker listener of a single-node cluster: this node is the only broker and the controller
named (a broker names a random alive broker; there is one). v1 adds the endpoint type asked
for (KIP-919): 1, brokers, is served; 2, controllers, is MISMATCHED_ENDPOINT_TYPE (a broker
listener does not describe the quorum) and any other UNSUPPORTED_ENDPOINT_TYPE, each with
Kafka's message and nothing else. v2 adds fenced brokers on request and each broker's fenced
flag; this node is never fenced. No ACL is needed: the cluster's authorized operations, when
asked for, are computed only for a principal with Describe on the cluster (0 for another).
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server import cluster_view
from minicoord.server.handlers.base import NOT_REQUESTED, Handler, RequestContext

API_KEY = 60
# Kafka's EndpointType ids (KIP-919); any other is UNKNOWN.
BROKER, CONTROLLER = 1, 2
_NAMES = {BROKER: "BROKER", CONTROLLER: "CONTROLLER"}


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    # v0 has no field: it describes brokers (the field's default).
    endpoint = request.endpoint_type if version >= 1 else BROKER
    if endpoint not in _NAMES:
        # Unreachable at v0 over the wire, where Kafka would answer INVALID_REQUEST.
        return _refusal(
            ctx, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint}"
        )
    if endpoint != BROKER:
        return _refusal(
            ctx,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            f"of type {_NAMES[endpoint]}",
        )
    response = ctx.spec.response
    return response(
        version=version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=BROKER,
        cluster_id=ctx.broker.cluster_id,
        controller_id=cluster_view.controller_id(ctx),
        brokers=[
            response.DescribeClusterBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False
            )
            for b in cluster_view.brokers(ctx)
        ],
        authorized_operations=(
            cluster_view.cluster_operations(ctx)
            if request.include_cluster_authorized_operations
            else NOT_REQUESTED
        ),
    )


def _refusal(ctx: RequestContext, error: ErrorCode, message: str) -> Any:
    # Kafka's refusal sets the error alone: the schema's defaults for the rest.
    return ctx.spec.response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        endpoint_type=BROKER,
        cluster_id="",
        controller_id=-1,
        brokers=[],
        authorized_operations=NOT_REQUESTED,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
