"""FindCoordinator (key 10), versions 0-6.

Every group's and every transactional id's coordinator is this node. v1 adds the key type
(0 group, 1 transaction) and an error message; v3 is flexible; v4 batches keys (KIP-699);
v5/v6 only widen the errors a client must handle. An empty key, or a key type Kafka has no
coordinator for, is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import FindCoordinatorResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.request_log import refused
from minicoord.server.security import authorize
from minicoord.server.security.acls import ResourceType

API_KEY = 10
GROUP = ResourceType.GROUP
GROUP_KEY = 0
TRANSACTION_KEY = 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    if ctx.broker.authorizer is not None:
        # As Kafka: Describe on the group (or transactional id) before anything else.
        if key_type == GROUP_KEY and not authorize.allowed(ctx, authorize.DESCRIBE, GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
        if key_type == TRANSACTION_KEY and not authorize.allowed(
            ctx, authorize.DESCRIBE, authorize.TRANSACTIONAL_ID, key
        ):
            return (
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "Transactional Id authorization failed.",
            )
    if key_type == TRANSACTION_KEY:
        if not key:
            refused(ctx, ErrorCode.INVALID_REQUEST, "empty transactional id")
            return ErrorCode.INVALID_REQUEST, "empty transactional id"
        broker = ctx.broker
        coordinator = broker.transactions
        # As for groups: a loading coordinator is still this node (its requests then get
        # COORDINATOR_LOAD_IN_PROGRESS), one whose partition failed to load is none.
        if coordinator.refused(key) is ErrorCode.COORDINATOR_NOT_AVAILABLE:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the id's transaction log is unavailable"
        if not broker.topics.transaction_state_exists:
            # Kafka creates the topic on the first lookup of a transaction coordinator.
            broker.create_transaction_state_topic(coordinator.partition_for(key))
        return ErrorCode.NONE, None
    if key_type != GROUP_KEY:
        refused(ctx, ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
        return ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}"
    if not key:
        refused(ctx, ErrorCode.INVALID_REQUEST, "empty group id")
        return ErrorCode.INVALID_REQUEST, "empty group id"
    error = ctx.broker.coordinator.unavailable(key)
    # A loading partition still has this node as its coordinator; the group requests that
    # follow get COORDINATOR_LOAD_IN_PROGRESS. Failed or moved partitions have none here.
    if error is not None and error is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group's offsets partition is unavailable"
    if not ctx.broker.topics.offsets_topic_exists:
        # Kafka creates the offsets topic on the first lookup of a group's coordinator.
        ctx.broker.create_offsets_topic(ctx.broker.coordinator.partition_for(key))
    return ErrorCode.NONE, None


def handle(ctx: RequestContext, request: Any) -> Any:
    node = ctx.broker.config.broker_id
    host, port = ctx.channel.address
    version = ctx.version
    key_type = request.key_type if version >= 1 else GROUP_KEY
    if version < 4:
        error, message = _lookup(ctx, request.key, key_type)
        ok = error is ErrorCode.NONE
        return FindCoordinatorResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=node if ok else -1,
            host=host if ok else "",
            port=port if ok else -1,
        )
    coordinators = []
    for key in request.coordinator_keys:
        error, message = _lookup(ctx, key, key_type)
        ok = error is ErrorCode.NONE
        coordinators.append(
            FindCoordinatorResponse.Coordinator(
                key=key,
                node_id=node if ok else -1,
                host=host if ok else "",
                port=port if ok else -1,
                error_code=error,
                error_message=message,
            )
        )
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
