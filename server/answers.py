"""What goes back to a client: framed answers, and replies that are filled in later.

A connection answers in request order; an answer is either ready when its request is handled
(bytes, framed here) or a `ParkedReply` that a coordinator outcome, a write reaching the log
or a timer fills later.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minicoord.protocol.apis import ApiSpec
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.headers import RequestHeader, response_header
from minicoord.server.handlers.base import EncodedResponse, RequestContext

if TYPE_CHECKING:
    from minicoord.server.connection import KafkaConnection
    from minicoord.server.handlers import HandlerRegistry

_SIZE = struct.Struct(">i")
_SIZE_CORRELATION = struct.Struct(">ii")
API_VERSIONS_KEY = 18
# One framed answer: its bytes, or buffers to write in order (a Fetch's record sets are
# written from the log's own buffers with one vectored write, never joined).
Answer = bytes | list[bytes]


def encode_response(version: int, correlation_id: int, spec: ApiSpec, response: Any) -> Answer:
    """The framed answer to a request at `version` with `correlation_id`: bytes, or a list of
    buffers when the body is one (record sets). The header's two numbers rather than the
    header: a parked reply keeps just those."""
    body = response.body if type(response) is EncodedResponse else response.encode(version=version)
    # ApiVersions answers with header v0 at every version, so that a client which does not
    # yet know our versions can always read it (KIP-511).
    flexible = version >= spec.response_flexible_from and spec.key != API_VERSIONS_KEY
    if type(body) is bytes:
        # Size and header (response_header's layout) in one pack: every answer passes here.
        if flexible:
            return _SIZE_CORRELATION.pack(len(body) + 5, correlation_id) + b"\x00" + body
        return _SIZE_CORRELATION.pack(len(body) + 4, correlation_id) + body
    head = response_header(correlation_id, flexible)
    if type(body) is list:
        size = len(head) + sum(len(part) for part in body)
        return [_SIZE.pack(size) + head, *body]
    return _SIZE.pack(len(head) + len(body)) + head + body


def api_versions_fallback(
    header: RequestHeader, handlers: HandlerRegistry
) -> tuple[RequestHeader, Any]:
    """The answer to ApiVersions at a version we do not serve (KIP-511): v0, listing only
    ApiVersions' own versions, as Kafka's getErrorResponse does, so the client can retry at
    one we serve."""
    from minicoord.server.handlers import api_versions

    own = [v for v in handlers.api_versions() if v.api_key == API_VERSIONS_KEY]
    response = api_versions.build(0, ErrorCode.UNSUPPORTED_VERSION, own)
    return RequestHeader(header.api_key, 0, header.correlation_id, header.client_id), response


class ParkedReply:
    """A response slot filled later, when the coordinator (or a timer) resolves it."""

    __slots__ = (
        "_build",
        "_conn",
        "_correlation_id",
        "_response",
        "_spec",
        "_version",
        "data",
        "delay_ms",
        "observe",
    )

    def __init__(
        self,
        conn: KafkaConnection,
        header: RequestHeader,
        spec: ApiSpec,
        build: Callable | None,
        response: Any = None,
    ) -> None:
        self._conn = conn
        # The header's two numbers the answer needs, not the header: a crowd's joins and
        # syncs wait at once, and the header object would be one more per waiting request.
        self._version = header.api_version
        self._correlation_id = header.correlation_id
        self._spec = spec
        # `build(outcome)` makes the response; without it, the response is known already
        # (KafkaConnection.hold), which spares a hot path a closure per request.
        self._build = build
        self._response = response
        self.data: Answer | None = None
        # Injected latency, and the metrics hook: both set by the connection when in use.
        self.delay_ms = 0
        self.observe: Callable[[Any], None] | None = None

    def resolve(self, outcome: Any) -> None:
        if self.data is not None:
            return
        if self.delay_ms:
            delay, self.delay_ms = self.delay_ms, 0
            self._conn.broker.call_later(delay, lambda: self.resolve(outcome))
            return
        response = self.make(outcome)
        if self.observe is not None:
            self.observe(response)
        self.fill(encode_response(self._version, self._correlation_id, self._spec, response))

    def set_build(self, build: Callable) -> None:
        """How the response is made, for a reply parked before its request was handled (a
        Produce held while its partitions load: server/data/produce_gate.py)."""
        self._build = build

    def make(self, outcome: Any) -> Any:
        """The response for `outcome`. A subclass that carries its request's few fields in
        slots of its own (JoinGroup's, SyncGroup's) makes it here: one object per waiting
        request, where a `build` closure would add a function, its cells and the context."""
        build = self._build
        return self._response if build is None else build(outcome)

    def context(self) -> RequestContext:
        """The request's context, made again (for a refusal's log line, which is rare)."""
        conn = self._conn
        spec = self._spec
        header = RequestHeader(spec.key, self._version, self._correlation_id, conn.client_id)
        return RequestContext(conn.broker, conn, header, spec)

    def fill(self, data: Answer) -> None:
        self.data = data
        self._conn.flush()
