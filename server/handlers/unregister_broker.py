"""UnregisterBroker (key 64), version 0: drop a broker's registration, as Kafka's controller
does for `kafka-cluster.sh unregister` and Admin.unregisterBroker (ControllerApis,
ReplicationControlManager.unregisterBroker).

Alter on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED). An id other than this node's
is not registered: BROKER_ID_NOT_REGISTERED. This node's own id is answered NONE, and nothing
changes: a live Kafka broker whose registration is dropped registers again (KIP-631), and this
node is always live. Kafka sends no message with either error; neither does minicoord.
"""

from __future__ import annotations

import logging
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize

API_KEY = 64

log = logging.getLogger("minicoord.server")


def handle(ctx: RequestContext, request: Any) -> Any:
    if not authorize.cluster_allowed(ctx, authorize.ALTER):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif request.broker_id != ctx.broker.config.broker_id:
        error = ErrorCode.BROKER_ID_NOT_REGISTERED
    else:
        error = ErrorCode.NONE
        log.info(
            "broker %d (this node) unregistered by %s; registered again at once, as a live "
            "Kafka broker registers again",
            request.broker_id,
            ctx.principal,
        )
    return ctx.spec.response(
        version=ctx.version, throttle_time_ms=0, error_code=error, error_message=None
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
