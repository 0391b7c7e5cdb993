"""DescribeAcls (key 29), versions 1-3 (Kafka 4 dropped 0).

The ACLs a filter matches (pattern types LITERAL, PREFIXED, ANY and MATCH as Kafka reads
them), grouped by resource pattern. Needs Describe on the cluster; SECURITY_DISABLED without
an authorizer. A filter with an UNKNOWN (0) type, pattern type, operation or permission
closes the connection unanswered, as Kafka cannot parse it.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeAclsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import NO_RESPONSE, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import InvalidAcl
from minicoord.server.security.records import FILTER_FIELDS, filter_from_wire, unparseable

API_KEY = 29
Resource = DescribeAclsResponse.DescribeAclsResource
Description = Resource.AclDescription


def handle(ctx: RequestContext, request: Any) -> Any:
    if unparseable(ctx, [request], FILTER_FIELDS):
        return NO_RESPONSE
    broker = ctx.broker
    if not authorize.cluster_allowed(ctx, authorize.DESCRIBE):
        return _error(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authorize.not_authorized(ctx))
    if broker.authorizer is None:
        return _error(ctx, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    flt = filter_from_wire(request, ctx.version)
    try:
        flt.validate()
    except InvalidAcl as exc:
        return _error(ctx, ErrorCode.INVALID_REQUEST, str(exc))
    by_resource: dict[tuple[int, str, int], list[Any]] = {}
    for _, acl in broker.acls.matching(flt):
        key = (int(acl.resource_type), acl.name, int(acl.pattern_type))
        by_resource.setdefault(key, []).append(
            Description(
                principal=acl.principal,
                host=acl.host,
                operation=int(acl.operation),
                permission_type=int(acl.permission),
            )
        )
    resources = [
        Resource(resource_type=rtype, resource_name=name, pattern_type=ptype, acls=acls)
        for (rtype, name, ptype), acls in by_resource.items()
    ]
    return DescribeAclsResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        resources=resources,
    )


def _error(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    return DescribeAclsResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        resources=[],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
