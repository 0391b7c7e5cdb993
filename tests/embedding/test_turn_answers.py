"""Answers go out when the event loop's turn ends, one write per connection.

Checked on the server's own loop with connections whose transports only collect what is
written, so the moment and the number of writes are seen exactly.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from minicoord.server.connection import KafkaConnection
from minicoord.testing.embedded import EmbeddedServer
from minicoord.testing.transports import CollectingTransport


def api_versions(correlation_id: int) -> bytes:
    """An ApiVersions v0 request frame (header v1, empty body)."""
    client = b"turns"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(body)) + body


def correlation_ids(written: bytes) -> list[int]:
    """The correlation ids of the framed answers in one write, in order."""
    ids, pos = [], 0
    while pos < len(written):
        size, correlation = struct.unpack_from(">ii", written, pos)
        ids.append(correlation)
        pos += 4 + size
    assert pos == len(written)
    return ids


def test_answers_are_written_once_the_turn_has_read_every_request() -> None:
    with EmbeddedServer() as server:
        transports: list[CollectingTransport] = []

        def read_all() -> list[int]:
            """Five connections read in one turn, the last with three pipelined requests."""
            for n in range(5):
                conn = KafkaConnection(server.server.broker)
                transport = CollectingTransport(conn)
                conn.connection_made(transport)  # type: ignore[arg-type]
                transports.append(transport)
                frames = [api_versions(10 * n + i) for i in range(3 if n == 4 else 1)]
                conn.data_received(b"".join(frames))
            return [len(t.writes) for t in transports]

        # Nothing is written while the turn is still reading.
        assert server.call(read_all) == [0] * 5
        writes = server.call(lambda: [list(t.writes) for t in transports])
        # Then one write per connection, its answers in request order.
        assert [len(w) for w in writes] == [1] * 5
        assert [correlation_ids(w[0]) for w in writes] == [[0], [10], [20], [30], [40, 41, 42]]


def test_a_connection_driven_without_a_loop_is_answered_as_it_reads() -> None:
    from minicoord.server.broker import Broker
    from minicoord.server.config import Config

    conn = KafkaConnection(Broker(Config()))
    transport = CollectingTransport(conn)
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(api_versions(7) + api_versions(8))
    assert [correlation_ids(w) for w in transport.writes] == [[7, 8]]
    conn.data_received(api_versions(9))
    assert [correlation_ids(w) for w in transport.writes] == [[7, 8], [9]]


def test_a_stop_beginning_in_the_same_turn_still_sends_the_turns_answers() -> None:
    import asyncio

    from minicoord.server.app import Server

    async def scenario() -> list[bytes]:
        server = Server(port=0)
        await server.start()
        conn = KafkaConnection(server.broker)
        transport = CollectingTransport(conn)
        conn.connection_made(transport)  # type: ignore[arg-type]
        # The stop's first step is queued ahead of the end of the turn the read corks.
        stopping = asyncio.ensure_future(server.stop(grace_s=1.0))
        conn.data_received(api_versions(5))
        await stopping
        return transport.writes

    writes = asyncio.run(scenario())
    assert [correlation_ids(w) for w in writes] == [[5]]


def offset_commit(group: str, topic: str, offset: int, correlation_id: int) -> bytes:
    """An OffsetCommit v8 request frame of a consumer that manages its own partitions."""
    from kafka.protocol.consumer import OffsetCommitRequest
    from minicoord.bench.pump import frame

    t = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[t(name=topic, partitions=[t.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="")])],
    )  # fmt: skip
    raw = frame(request, 8, "turns")
    # The pump's frames start at correlation id 0: this one's own, for telling answers apart.
    return raw[:8] + struct.pack(">i", correlation_id) + raw[12:]


@pytest.mark.parametrize("policy", ["write", "fsync"])
def test_a_commit_is_answered_only_once_its_record_is_in_the_log_file(
    tmp_path: Any, policy: str
) -> None:
    # Under `write` a one-partition commit's answer is not parked: the turn's end writes the
    # turn's records before it writes any answer. Under `fsync` it is parked behind the record
    # its handler already appended, until the write and the sync.
    group = "turn-answers-commit"

    def in_log_files() -> bool:
        return any(group.encode() in p.read_bytes() for p in tmp_path.rglob("*.log"))

    with EmbeddedServer(
        configs={"log.flush.policy": policy}, topics=[("t", 1)], data_dir=tmp_path
    ) as server:
        seen: list[tuple[list[int], bool]] = []

        class Watching(CollectingTransport):
            def write(self, data: bytes) -> None:
                seen.append((correlation_ids(bytes(data)), in_log_files()))
                super().write(data)

        def read() -> int:
            conn = KafkaConnection(server.server.broker)
            transport = Watching(conn)
            conn.connection_made(transport)  # type: ignore[arg-type]
            conn.data_received(offset_commit(group, "t", 42, 3))
            return len(seen)

        assert server.call(read) == 0
        # Read back on the loop: the turn has ended by the time this call runs (under fsync,
        # the sync runs on a thread of its own: waited for, boundedly).
        for _ in range(200):
            if server.call(lambda: list(seen)):
                break
            time.sleep(0.01)
        assert server.call(lambda: list(seen)) == [([3], True)]


def test_a_turn_whose_write_fails_halts_before_any_answer_goes_out(monkeypatch: Any) -> None:
    # The answers corked in the turn may include commits answered on the promise of the
    # write: none may go out, so the server stops as on a failed log write.
    from minicoord.server import broker as broker_module
    from minicoord.server.broker import Broker
    from minicoord.server.config import Config

    broker = Broker(Config())
    conn = KafkaConnection(broker)
    transport = CollectingTransport(conn)
    conn.connection_made(transport)  # type: ignore[arg-type]
    halted: list[str] = []

    def halt(reason: str) -> None:
        halted.append(reason)
        raise SystemExit(70)

    def failing_write() -> None:
        raise RuntimeError("a record that cannot be encoded")

    monkeypatch.setattr(broker_module, "halt", halt)
    monkeypatch.setattr(broker, "_flush", failing_write)
    # A turn that read one request and answered it on the promise of the write.
    conn._corked = [api_versions(1)]
    broker._corked = [conn]
    broker._flush_scheduled = True
    with pytest.raises(SystemExit):
        broker.uncork()
    assert halted == ["cannot write the turn's records"]
    assert transport.writes == []
