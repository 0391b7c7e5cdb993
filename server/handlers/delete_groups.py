"""DeleteGroups (key 42), versions 0-2.

Only an Empty group can be deleted (NON_EMPTY_GROUP otherwise); its group metadata and every
committed offset are tombstoned. v2 is flexible.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 42


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    names = list(request.groups_names)
    # With ACLs (as Kafka): Delete on each group, else GROUP_AUTHORIZATION_FAILED for it.
    denied = [g for g in names if authorize.group_denied(ctx, g, authorize.DELETE)]
    if denied:
        names = [g for g in names if g not in denied]

    def build(errors: list[Any]) -> Any:
        return DeleteGroupsResponse(
            version=ctx.version,
            throttle_time_ms=0,
            results=[
                DeleteGroupsResponse.DeletableGroupResult(group_id=name, error_code=error)
                for name, error in zip(names, errors, strict=True)
            ]
            + [
                DeleteGroupsResponse.DeletableGroupResult(
                    group_id=name, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
                )
                for name in denied
            ],
        )

    parked = ctx.park(build)
    result = broker.coordinator.delete_groups(broker.now(), names)
    broker.persist_shares()  # a deleted share group's state goes: its tombstones first
    broker.apply(result, parked)
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
