"""What the tests of the controller's admin APIs (ElectLeaders, the partition reassignment
APIs, DescribeQuorum) share: a raw client of a server with an authorizer, a stock admin
client, and Kafka's words for a refused cluster check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kafka import KafkaAdminClient
from minicoord.clients.connection import ProtocolClient
from minicoord.server.app import Server
from minicoord.server.config import Config

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC = "orders"


def refused(api: str) -> str:
    """The message of a cluster check's refusal for `api` (authorize.not_authorized)."""
    return f"Request {api} from User:ANONYMOUS is not authorized."


@asynccontextmanager
async def acl_client(*acls: str) -> AsyncIterator[ProtocolClient]:
    """A raw client of a server with an authorizer, the given ACLs and a 3-partition topic."""
    config = Config.from_pairs({"authorizer.class.name": AUTHORIZER})
    async with Server(config, "127.0.0.1", 0, topics=[(TOPIC, 3)], acls=acls) as server:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        try:
            yield client
        finally:
            await client.close()


async def ask(client: ProtocolClient, request: Any) -> Any:
    return await asyncio.wait_for(client.request(request), 5)


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="controller-apis", request_timeout_ms=10_000
    )
