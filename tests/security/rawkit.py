"""A blocking raw Kafka client for refusal tests: exact frames in, exact answers out."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)


class Closed(Exception):
    pass


class Raw:
    def __init__(self, address: str, tls: ssl.SSLContext | None = None, timeout: float = 5) -> None:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock: Any = tls.wrap_socket(sock, server_hostname=host) if tls else sock
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any, version: int) -> int:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="refusal-test")
        body = bytes(request.encode(header=True))
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        return self.correlation

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            try:
                chunk = self.sock.recv(n - len(out))
            except (ConnectionResetError, ssl.SSLError) as exc:
                raise Closed(str(exc)) from None
            if not chunk:
                raise Closed("closed by the server")
            out += chunk
        return out

    def closed_by_server(self) -> bool:
        try:
            self._exactly(1)
        except Closed:
            return True
        except TimeoutError:
            return False
        return False

    def answer(self, response_cls: Any, version: int, flexible: bool = False) -> Any:
        frame = self.read_frame()
        pos = 4  # correlation id
        if flexible:
            pos += 1  # empty tagged fields
        return response_cls.decode(memoryview(frame)[pos:], version=version)

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        self.send(SaslHandshakeRequest(version=version, mechanism=mechanism), version)
        return self.answer(SaslHandshakeResponse, version)

    def authenticate(self, token: bytes, version: int = 1) -> Any:
        self.send(SaslAuthenticateRequest(version=version, auth_bytes=token), version)
        return self.answer(SaslAuthenticateResponse, version, flexible=version >= 2)

    def api_versions(self) -> Any:
        from kafka.protocol.metadata import ApiVersionsResponse

        self.send(ApiVersionsRequest(version=0), 0)
        return self.answer(ApiVersionsResponse, 0)

    def metadata(self) -> Any:
        from kafka.protocol.metadata import MetadataResponse

        self.send(MetadataRequest(version=1, topics=[]), 1)
        return self.answer(MetadataResponse, 1)


def plain_token(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()


def client_tls(ca: str, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(cert, key)
    return context
