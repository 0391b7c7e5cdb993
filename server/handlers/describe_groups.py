"""DescribeGroups (key 15), versions 0-6.

State, protocol, and members with their metadata and assignment — both shown only once the
group is Stable, as Kafka does. v3 adds authorized operations (never computed); v4 members'
group.instance.id; v5 is flexible; v6 an error message, and a group that does not exist is
GROUP_ID_NOT_FOUND (older versions describe it as Dead with no error).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeGroupsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import NOT_REQUESTED, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 15
GROUP = ResourceType.GROUP
Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = Described.DescribedGroupMember


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    groups = []
    names = list(request.groups)
    # With ACLs (as Kafka): Describe on each group, else GROUP_AUTHORIZATION_FAILED for it.
    # A list, so that refused groups are answered in the order they were asked for.
    denied = [g for g in names if authorize.group_denied(ctx, g, authorize.DESCRIBE)]
    wanted = [g for g in names if g not in denied]
    # Asked for, they are reported with or without ACLs: without, every operation a group
    # supports (as Kafka's AuthHelper.authorizedOperations).
    with_ops = version >= 3 and request.include_authorized_operations
    for g in denied:
        groups.append(
            Described(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                error_message=None,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=[],
                authorized_operations=NOT_REQUESTED,
            )
        )
    for d in ctx.broker.coordinator.describe_groups(wanted):
        error = d.error
        message = None
        if error is ErrorCode.GROUP_ID_NOT_FOUND:
            if version < 6:
                error = ErrorCode.NONE
            else:
                message = d.message or f"Group {d.group_id} not found."
        groups.append(
            Described(
                error_code=error,
                error_message=message,
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_name,
                members=[
                    DescribedMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ],
                # kafka-python takes the bitfield as the set of its bits.
                authorized_operations=authorize.operation_set(ctx, GROUP, d.group_id)
                if with_ops and error is ErrorCode.NONE
                else NOT_REQUESTED,
            )
        )
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=groups)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
