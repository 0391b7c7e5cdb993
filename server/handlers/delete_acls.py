"""DeleteAcls (key 31), versions 1-3 (Kafka 4 dropped 0).

Removes every ACL each filter matches and lists them per filter; the removals are in the
cluster metadata log before the answer. Needs Alter on the cluster
(CLUSTER_AUTHORIZATION_FAILED per filter otherwise); SECURITY_DISABLED without an authorizer.
A filter with an UNKNOWN (0) type, pattern type, operation or permission closes the
connection unanswered, nothing deleted, as Kafka cannot parse the request.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteAclsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import NO_RESPONSE, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import AclFilter, InvalidAcl
from minicoord.server.security.records import (
    FILTER_FIELDS,
    delete,
    filter_from_wire,
    unparseable,
)

API_KEY = 31
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


def handle(ctx: RequestContext, request: Any) -> Any:
    if unparseable(ctx, request.filters, FILTER_FIELDS):
        return NO_RESPONSE
    broker = ctx.broker
    count = len(request.filters)
    if broker.authorizer is None:
        return _all(ctx, count, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        return _all(
            ctx, count, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authorize.not_authorized(ctx)
        )
    # Per request filter: the filter, or the reason it is refused.
    slots: list[AclFilter | str] = []
    for f in request.filters:
        flt = filter_from_wire(f, ctx.version)
        try:
            flt.validate()
            slots.append(flt)
        except InvalidAcl as exc:
            slots.append(str(exc))
    matched, records = delete(broker.acls, [s for s in slots if isinstance(s, AclFilter)])
    broker.persist_acls(records)
    per_filter = iter(matched)
    results = []
    for slot in slots:
        if isinstance(slot, str):
            results.append(
                FilterResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=slot, matching_acls=[]
                )
            )
            continue
        acls = [
            Matching(
                error_code=0,
                error_message=None,
                resource_type=int(acl.resource_type),
                resource_name=acl.name,
                pattern_type=int(acl.pattern_type),
                principal=acl.principal,
                host=acl.host,
                operation=int(acl.operation),
                permission_type=int(acl.permission),
            )
            for acl in next(per_filter)
        ]
        results.append(FilterResult(error_code=0, error_message=None, matching_acls=acls))
    response = DeleteAclsResponse(version=ctx.version, throttle_time_ms=0, filter_results=results)
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the removals are durable
    return parked


def _all(ctx: RequestContext, count: int, error: ErrorCode, message: str | None) -> Any:
    results = [
        FilterResult(error_code=error, error_message=message, matching_acls=[])
        for _ in range(count)
    ]
    return DeleteAclsResponse(version=ctx.version, throttle_time_ms=0, filter_results=results)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
