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
from minicoord.server.handlers.base import Handler, RequestContext

API_KEY = 15
Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = Described.DescribedGroupMember


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    groups = []
    for d in ctx.broker.coordinator.describe_groups(list(request.groups)):
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
            )
        )
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=groups)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
