"""What the tests of the controller's admin APIs (ElectLeaders, the partition reassignment
APIs, DescribeQuorum) share: a raw client of a server with an authorizer, a stock admin
client, and Kafka's words for a refused cluster check."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Any

from authzkit import authorized_client
from kafka import KafkaAdminClient
from minicoord.clients.connection import ProtocolClient

TOPIC = "orders"


def refused(api: str) -> str:
    """The message of a cluster check's refusal for `api` (authorize.not_authorized)."""
    return f"Request {api} from User:ANONYMOUS is not authorized."


def acl_client(*acls: str) -> AbstractAsyncContextManager[ProtocolClient]:
    """A raw client of a server with an authorizer, the given ACLs and a 3-partition topic."""
    return authorized_client(acls, [(TOPIC, 3)])


async def ask(client: ProtocolClient, request: Any) -> Any:
    return await asyncio.wait_for(client.request(request), 5)


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="controller-apis", request_timeout_ms=10_000
    )
