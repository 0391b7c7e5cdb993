"""A raw protocol client of a server with an authorizer (Kafka's StandardAuthorizer name)
and the ACLs a test gives: how the admin APIs' tests check who may ask what."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from minicoord.clients.connection import ProtocolClient
from minicoord.server.app import Server
from minicoord.server.config import Config

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@asynccontextmanager
async def authorized_client(
    acls: Iterable[str], topics: Iterable[tuple[str, int]] = ()
) -> AsyncIterator[ProtocolClient]:
    """A client (as User:ANONYMOUS) of an in-process server with ACLs on, `acls` and `topics`."""
    config = Config.from_pairs({"authorizer.class.name": AUTHORIZER})
    async with Server(config, "127.0.0.1", 0, topics=list(topics), acls=list(acls)) as server:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "acl-test")
        try:
            yield client
        finally:
            await client.close()
