"""Connection limits and back-pressure: idle and half-sent connections, max.connections,
requests awaiting answers, and clients that do not read."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import AsyncIterator

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.server.app import Server
from minicoord.server.config import Config


@pytest.fixture
async def limited() -> AsyncIterator[Server]:
    config = Config.from_pairs(
        {
            "connections.max.idle.ms": "300",
            "max.connections": "3",
            "queued.max.requests": "4",
        }
    )
    async with Server(config, "127.0.0.1", 0, topics=[("t", 1)]) as server:
        yield server


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
    except TimeoutError:
        return False


async def test_idle_and_half_sent_connections_are_closed(
    limited: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="minicoord.connection")
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", limited.port)
    half_reader, half_writer = await asyncio.open_connection("127.0.0.1", limited.port)
    half_writer.write(struct.pack(">i", 100) + b"only part of the request")
    assert await closed_within(idle_reader, 5)
    assert await closed_within(half_reader, 5)
    # An unused connection is closed quietly (DEBUG); a request that stopped, with a warning.
    closes = [(r.levelname, r.getMessage()) for r in caplog.records if "idle for" in r.getMessage()]
    assert sorted(level for level, _ in closes) == ["DEBUG", "WARNING"], closes
    assert all("connections.max.idle.ms=300" in message for _, message in closes)
    assert any(m.endswith("part of a request unread") for lvl, m in closes if lvl == "WARNING")
    idle_writer.close()
    half_writer.close()


async def test_a_busy_connection_is_not_idle(limited: Server) -> None:
    async with await ProtocolClient.connect("127.0.0.1", limited.port) as client:
        for _ in range(8):  # 0.8 s of activity, well past the 300 ms idle limit
            assert (await client.request(ApiVersionsRequest(version=0))).error_code == 0
            await asyncio.sleep(0.1)
        assert not client.closed.is_set()


async def test_max_connections(limited: Server) -> None:
    clients = [await ProtocolClient.connect("127.0.0.1", limited.port) for _ in range(3)]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", limited.port)
        assert await closed_within(reader, 5)
        writer.close()
        for c in clients:  # the first three are still served
            assert (await c.request(ApiVersionsRequest(version=0))).error_code == 0
    finally:
        for c in clients:
            await c.close()


def fetch_request() -> FetchRequest:
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1024,
    )
    return FetchRequest(
        version=11,
        replica_id=-1,
        max_wait_ms=30,
        min_bytes=1,
        max_bytes=1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic="t", partitions=[part])],
        forgotten_topics_data=[],
        rack_id="",
    )


async def test_pipelined_requests_beyond_the_limit_wait_to_be_read(limited: Server) -> None:
    async with await ProtocolClient.connect("127.0.0.1", limited.port) as client:
        # 40 long-polls sent at once; at most 4 may be pending in the server at a time.
        responses = await asyncio.wait_for(
            asyncio.gather(*(client.request(fetch_request()) for _ in range(40))), 30
        )
        assert len(responses) == 40
        assert all(r.responses[0].partitions[0].error_code == 0 for r in responses)
        assert len(limited.broker.connections) == 1
        assert limited.broker.peak_pending == 4


async def test_a_client_that_does_not_read_is_not_buffered_without_bound() -> None:
    async with Server(Config(), "127.0.0.1", 0, topics=[("wide", 300)]) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        topics = [MetadataRequest.MetadataRequestTopic(name="wide", topic_id=None)]
        request = MetadataRequest(version=9, topics=topics, allow_auto_topic_creation=False)
        request.with_header(correlation_id=1, client_id="slow")
        frame = bytes(request.encode(header=True, framed=True))
        count = 3_000  # each answer describes 300 partitions: about 30 MB, unread for now
        writer.write(frame * count)
        deadline = time.monotonic() + 30
        while not server.broker.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        (conn,) = list(server.broker.connections)
        while not conn.reading_paused and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert conn.reading_paused
        # Reading stopped with the write buffer near its high-water mark, not 30 MB.
        await asyncio.sleep(0.2)
        assert conn.transport.get_write_buffer_size() < 2 * 1024 * 1024
        assert conn.buffered > 0  # the rest of the burst waits, unparsed
        # Once the client reads, everything is answered, in order.
        received = 0

        async def drain() -> None:
            nonlocal received
            while received < count:
                body = await _one_response(reader)
                assert struct.unpack_from(">i", body)[0] == 1
                received += 1

        await asyncio.wait_for(drain(), 120)
        assert received == count
        writer.close()


async def _one_response(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def test_a_field_that_runs_past_its_frame_closes_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A Produce whose records claim 2^31-1 bytes in a frame of a few: Kafka's reader fails on
    # the missing bytes and closes the connection; kafka-python's would cut the field short.
    body = (
        struct.pack(">hhih", 0, 7, 7, 1) + b"x"  # Produce v7, correlation 7, client id "x"
        + struct.pack(">hhi", -1, 1, 1000)  # no transactional id, acks 1, timeout
        + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"  # one topic, "t"
        + struct.pack(">ii", 1, 0)  # one partition, index 0
        + struct.pack(">i", 2**31 - 1) + bytes(20)  # records: 2^31-1 bytes claimed, 20 sent
    )  # fmt: skip
    async with Server(Config(), "127.0.0.1", 0, topics=[("t", 1)]) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(struct.pack(">i", len(body)) + body)
        await writer.drain()
        assert await closed_within(reader, 5)
        writer.close()
        async with await ProtocolClient.connect("127.0.0.1", server.port) as other:
            assert (
                await other.request(
                    ApiVersionsRequest(
                        version=3, client_software_name="t", client_software_version="1"
                    ),
                    3,
                )
            ).error_code == 0
    closing = [r.getMessage() for r in caplog.records if "closing connection" in r.getMessage()]
    assert any(
        "undecodable Produce v7 request" in line and "past the end of its frame" in line
        for line in closing
    ), closing
