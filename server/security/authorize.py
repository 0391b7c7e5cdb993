"""The checks handlers make, in Kafka's terms (which request needs which operation is in
each handler, next to the error it answers; README, "ACLs", has the table).

Every function here answers "allowed" at once when no authorizer is configured; handlers on
hot paths test `ctx.broker.authorizer is not None` themselves before calling, so a server
without ACLs pays one attribute read per request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from minicoord.protocol.errors import ErrorCode
from minicoord.server.security.acls import (
    CLUSTER_NAME as CLUSTER_NAME,
)
from minicoord.server.security.acls import (
    SUPPORTED_OPERATIONS,
    ResourceType,
)
from minicoord.server.security.acls import (
    Operation as Operation,
)

if TYPE_CHECKING:
    from minicoord.server.handlers.base import RequestContext

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
READ = Operation.READ
WRITE = Operation.WRITE
CREATE = Operation.CREATE
DELETE = Operation.DELETE
ALTER = Operation.ALTER
DESCRIBE = Operation.DESCRIBE
DESCRIBE_CONFIGS = Operation.DESCRIBE_CONFIGS
ALTER_CONFIGS = Operation.ALTER_CONFIGS
IDEMPOTENT_WRITE = Operation.IDEMPOTENT_WRITE

# Kafka's "not computed" value of authorized-operations fields.
NOT_COMPUTED = -(2**31)


def host_of(ctx: RequestContext) -> str:
    # The connection's "/127.0.0.1" form, as is: the store strips it only when it decides
    # (a cached decision is then a lookup with no new string).
    return ctx.channel.client_host


def allowed(ctx: RequestContext, op: Operation, rtype: ResourceType, name: str) -> bool:
    store = ctx.broker.authorizer
    if store is None:
        return True
    return store.authorize(ctx.channel.principal, host_of(ctx), op, rtype, name)


def cluster_allowed(ctx: RequestContext, op: Operation) -> bool:
    return allowed(ctx, op, CLUSTER, CLUSTER_NAME)


def not_authorized(ctx: RequestContext) -> str:
    """The message of a cluster check's refusal, after Kafka's AuthHelper
    (`Request ... is not authorized.`, naming the request where Kafka prints its channel)."""
    return f"Request {ctx.spec.name} from {ctx.channel.principal} is not authorized."


def group_denied(ctx: RequestContext, group_id: str, op: Operation = READ) -> bool:
    """Whether the group check fails (GROUP_AUTHORIZATION_FAILED)."""
    store = ctx.broker.authorizer
    if store is None:
        return False
    channel = ctx.channel  # inlined: this check sits on every heartbeat with ACLs on
    return not store.authorize(channel.principal, channel.client_host, op, GROUP, group_id)


def denied_topics(ctx: RequestContext, op: Operation, names: Iterable[str | None]) -> set[str]:
    """The names (of those given) on which `op` is not allowed; empty without an authorizer."""
    store = ctx.broker.authorizer
    if store is None:
        return set()
    principal, host = ctx.channel.principal, host_of(ctx)
    return {
        name
        for name in set(names)
        if name is not None and not store.authorize(principal, host, op, TOPIC, name)
    }


def idempotent_write_allowed(ctx: RequestContext) -> bool:
    """InitProducerId without a transactional id: IdempotentWrite on the cluster, or (Kafka
    3+) Write on at least one topic."""
    store = ctx.broker.authorizer
    if store is None:
        return True
    principal, host = ctx.channel.principal, host_of(ctx)
    return store.authorize(
        principal, host, IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME
    ) or store.authorize_any(principal, host, WRITE, TOPIC)


def authorized_operations(ctx: RequestContext, rtype: ResourceType, name: str) -> int:
    """Kafka's bitfield of the resource type's operations allowed here (all of them without
    an authorizer, as Kafka reports them)."""
    store = ctx.broker.authorizer
    if store is None:
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(rtype, ()):
            bits |= 1 << op
        return bits
    return store.authorized_operations(ctx.channel.principal, host_of(ctx), rtype, name)


def operation_set(ctx: RequestContext, rtype: ResourceType, name: str) -> set[int]:
    """The same bitfield as the set of its bits (kafka-python's form of a bitfield)."""
    bits = authorized_operations(ctx, rtype, name)
    return {op for op in range(32) if bits >> op & 1}


# Config resource type codes (DescribeConfigs, IncrementalAlterConfigs).
CONFIG_TOPIC = 2
CONFIG_BROKER = 4
CONFIG_BROKER_LOGGER = 8
CONFIG_CLIENT_METRICS = 16
CONFIG_GROUP = 32
# Checked on the cluster, as Kafka's ConfigHelper and ControllerApis check them.
_CLUSTER_CONFIGS = (CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS)


def config_refusal(
    ctx: RequestContext, resource_type: int, name: str, op: Operation
) -> tuple[ErrorCode, str] | None:
    """With ACLs (as Kafka): `op` (DescribeConfigs, AlterConfigs) on the topic or group, or
    on the cluster for a broker, broker-logger or client-metrics resource; the error and
    message to answer, or None."""
    if ctx.broker.authorizer is None:
        return None
    if resource_type == CONFIG_TOPIC and not allowed(ctx, op, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if resource_type in _CLUSTER_CONFIGS and not cluster_allowed(ctx, op):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if resource_type == CONFIG_GROUP and not allowed(ctx, op, GROUP, name):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    return None
