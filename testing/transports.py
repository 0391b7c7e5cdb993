"""A transport for driving a `KafkaConnection` on the server's loop without a socket."""

from __future__ import annotations

from typing import Any


class CollectingTransport:
    """Keeps what the connection writes, in order, one entry per write; a close tells the
    connection it is lost, as a closed socket's transport does (the server's stop waits for
    that)."""

    def __init__(self, protocol: Any = None) -> None:
        self.protocol = protocol
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, data: list[bytes]) -> None:
        self.writes.append(b"".join(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40001), "sockname": ("127.0.0.1", 9092)}.get(
            name, default
        )

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        if self.protocol is not None:
            self.protocol.connection_lost(None)

    def abort(self) -> None:
        self.close()

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass
