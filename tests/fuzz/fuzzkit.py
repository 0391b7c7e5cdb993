"""Fuzzing harness: the server's real connection code fed through an in-memory transport.

KafkaConnection is the asyncio Protocol the server uses for every socket; here its
transport is a recorder instead of a socket, so thousands of hostile inputs run in seconds
through exactly the code a socket would drive. Bad input over real sockets is covered by
tests/protocol/test_wire.py.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from minicoord.server.broker import Broker
from minicoord.server.connection import KafkaConnection


class RecordingTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.protocol: KafkaConnection | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 9092)}.get(
            name, default
        )

    def write(self, data: bytes) -> None:
        assert not self.closed, "wrote to a closed transport"
        self.written += data

    def writelines(self, buffers: list[bytes]) -> None:
        for data in buffers:
            self.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.protocol is not None:
                self.protocol.connection_lost(None)

    abort = close

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def responses(self) -> list[bytes]:
        out, pos, data = [], 0, bytes(self.written)
        while len(data) - pos >= 4:
            (size,) = struct.unpack_from(">i", data, pos)
            out.append(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
        return out


def connect(broker: Broker) -> tuple[KafkaConnection, RecordingTransport]:
    conn = KafkaConnection(broker)
    transport = RecordingTransport()
    transport.protocol = conn
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def settle(broker: Broker) -> None:
    """Run the broker's loop until the callbacks already due have run (group commit etc.)."""
    loop = broker.loop_for_tests  # type: ignore[attr-defined]
    loop.run_until_complete(asyncio.sleep(0.001))
