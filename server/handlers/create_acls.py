"""CreateAcls (key 30), versions 1-3 (Kafka 4 dropped 0).

v1 adds the pattern type; v2 is flexible; v3 allows the USER resource type. Needs Alter on
the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise); without an
authorizer Kafka answers SECURITY_DISABLED. Each invalid ACL gets INVALID_REQUEST, the rest
are written to the cluster metadata log before the answer (an ACL that exists already is
not written again, and succeeds). A creation with an UNKNOWN (0) type, pattern type,
operation or permission closes the connection unanswered, nothing created, as Kafka cannot
parse the request.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreateAclsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import NO_RESPONSE, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import Acl, InvalidAcl
from minicoord.server.security.records import (
    CREATION_FIELDS,
    acl_from_wire,
    create,
    unparseable,
)

API_KEY = 30
Result_ = CreateAclsResponse.AclCreationResult


def handle(ctx: RequestContext, request: Any) -> Any:
    if unparseable(ctx, request.creations, CREATION_FIELDS):
        return NO_RESPONSE
    broker = ctx.broker
    count = len(request.creations)
    if broker.authorizer is None:
        return _all(ctx, count, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        return _all(
            ctx, count, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authorize.not_authorized(ctx)
        )
    results = []
    valid: list[Acl] = []
    for creation in request.creations:
        acl = acl_from_wire(creation, ctx.version)
        try:
            acl.validate()
        except InvalidAcl as exc:
            results.append(Result_(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc)))
            continue
        valid.append(acl)
        results.append(Result_(error_code=0, error_message=None))
    broker.persist_acls(create(broker.acls, valid))
    response = CreateAclsResponse(version=ctx.version, throttle_time_ms=0, results=results)
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the records are durable
    return parked


def _all(ctx: RequestContext, count: int, error: ErrorCode, message: str | None) -> Any:
    results = [Result_(error_code=error, error_message=message) for _ in range(count)]
    return CreateAclsResponse(version=ctx.version, throttle_time_ms=0, results=results)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
