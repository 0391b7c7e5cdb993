"""FindCoordinator (key 10), versions 0-6.

Every group's and every transactional id's coordinator is this node, the empty key's too
(Kafka keeps offsets for group "" working, and looks up any key). v1 adds the key type
(0 group, 1 transaction) and an error message; v3 is flexible; v4 batches keys (KIP-699);
v5/v6 only widen the errors a client must handle. A key type Kafka has no coordinator for is
INVALID_REQUEST. The error messages are Kafka's: before v4 the error's own text, "NONE" on
success (Errors.message()); from v4 none per key, unless the whole request failed.
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


# Errors.message() for the errors a lookup answers: the error's own text in Kafka's enum.
_MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    ),
}


def _lookup(ctx: RequestContext, key: str, key_type: int) -> ErrorCode:
    if ctx.broker.authorizer is not None:
        # As Kafka: Describe on the group (or transactional id) before anything else.
        if key_type == GROUP_KEY and not authorize.allowed(ctx, authorize.DESCRIBE, GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if key_type == TRANSACTION_KEY and not authorize.allowed(
            ctx, authorize.DESCRIBE, authorize.TRANSACTIONAL_ID, key
        ):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if key_type == TRANSACTION_KEY:
        broker = ctx.broker
        coordinator = broker.transactions
        # As for groups: a loading coordinator is still this node (its requests then get
        # COORDINATOR_LOAD_IN_PROGRESS), one whose partition failed to load is none.
        if coordinator.refused(key) is ErrorCode.COORDINATOR_NOT_AVAILABLE:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not broker.topics.transaction_state_exists:
            # Kafka creates the topic on the first lookup of a transaction coordinator.
            broker.create_transaction_state_topic(coordinator.partition_for(key))
        return ErrorCode.NONE
    error = ctx.broker.coordinator.unavailable(key)
    # A loading partition still has this node as its coordinator; the group requests that
    # follow get COORDINATOR_LOAD_IN_PROGRESS. Failed or moved partitions have none here.
    if error is not None and error is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if not ctx.broker.topics.offsets_topic_exists:
        # Kafka creates the offsets topic on the first lookup of a group's coordinator.
        ctx.broker.create_offsets_topic(ctx.broker.coordinator.partition_for(key))
    return ErrorCode.NONE


def handle(ctx: RequestContext, request: Any) -> Any:
    node = ctx.broker.config.broker_id
    host, port = ctx.channel.address
    version = ctx.version
    key_type = request.key_type if version >= 1 else GROUP_KEY
    keys = [request.key] if version < 4 else list(request.coordinator_keys)
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        # CoordinatorType.forId throws: the whole request fails, every key with the error's
        # own text (getErrorResponse).
        refused(ctx, ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
        errors = [ErrorCode.INVALID_REQUEST] * len(keys)
        with_messages = True
    else:
        errors = [_lookup(ctx, key, key_type) for key in keys]
        with_messages = version < 4
    answers = [
        (
            error,
            _MESSAGES[error] if with_messages else None,
            *((node, host, port) if error is ErrorCode.NONE else (-1, "", -1)),
        )
        for error in errors
    ]
    if version < 4:
        [(error, message, node_id, host, port)] = answers
        return FindCoordinatorResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=node_id,
            host=host,
            port=port,
        )
    coordinators = [
        FindCoordinatorResponse.Coordinator(
            key=key,
            node_id=node_id,
            host=host,
            port=port,
            error_code=error,
            error_message=message,
        )
        for key, (error, message, node_id, host, port) in zip(keys, answers, strict=True)
    ]
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
