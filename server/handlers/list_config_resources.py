"""ListConfigResources (key 74), versions 0-1: the resources one may describe configs of.

Kafka 4.1's KafkaApis.handleListConfigResources (KIP-1142). Version 0 was KIP-714's
ListClientMetricsResources and lists client-metrics subscriptions only
(server/client_metrics.py); v1 adds a filter by resource type, empty meaning every type v1
supports (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP), and each resource's type. Any
other type asked for fails the whole request with UNSUPPORTED_VERSION and no resources, as
Kafka answers (the client and broker agree on the set per version). Needs DescribeConfigs on
the cluster, else CLUSTER_AUTHORIZATION_FAILED and no resources; nothing per resource is
checked.

What is listed, in Kafka's order of types: the groups with a dynamic config of their own
(whether or not the group exists: the point of KIP-1142), the client-metrics subscriptions,
this node's id as a broker logger and as a broker, then every topic, `__consumer_offsets` once
it exists (Kafka's getAllTopics). Within a type, names are sorted (Kafka's order there is its
hash maps').
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.client_metrics import CLIENT_METRICS
from minicoord.server.group_configs import GROUP_RESOURCE
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 74
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# ListConfigResourcesRequest.supportedResourceTypes(): a new type needs a new version.
SUPPORTED = {
    0: frozenset({CLIENT_METRICS}),
    1: frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP_RESOURCE}),
}


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE_CONFIGS):
        return _answer(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    supported = SUPPORTED[version]
    # v0 has no filter field: kafka-python leaves it unset, so read it only from v1.
    asked = set(request.resource_types) if version >= 1 and request.resource_types else supported
    if not asked <= supported:
        return _answer(ctx, ErrorCode.UNSUPPORTED_VERSION, [])
    broker = ctx.broker
    node = str(broker.config.broker_id)
    listed: list[tuple[str, int]] = []
    if GROUP_RESOURCE in asked:
        groups = broker.coordinator.group_configs.overrides
        listed += [(g, GROUP_RESOURCE) for g in sorted(groups)]
    if CLIENT_METRICS in asked and "client_metrics" in broker.__dict__:
        # Made on first use (server/cluster_metadata.py): none made, none to list.
        names = broker.client_metrics.overrides
        listed += [(n, CLIENT_METRICS) for n in sorted(names)]
    if BROKER_LOGGER in asked:
        listed.append((node, BROKER_LOGGER))
    if BROKER in asked:
        listed.append((node, BROKER))
    if TOPIC in asked:
        listed += [(name, TOPIC) for name in sorted(t.name for t in broker.topics.all())]
    return _answer(ctx, ErrorCode.NONE, listed)


def _answer(ctx: RequestContext, error: ErrorCode, listed: list[tuple[str, int]]) -> Any:
    response = ctx.spec.response
    return response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        # v0 carries no type on the wire (its resources are all CLIENT_METRICS, the default).
        config_resources=[
            response.ConfigResource(resource_name=name, resource_type=rtype)
            for name, rtype in listed
        ],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
