"""What a handler is, and what it is given.

A handler turns one decoded request into a response object, or into a parked reply that the
coordinator completes later (JoinGroup waiting for the group, a follower's SyncGroup waiting
for the leader, a Fetch long-poll). Handlers never touch sockets or bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from minicoord.protocol.apis import ApiSpec
from minicoord.protocol.headers import RequestHeader
from minicoord.protocol.lean_dataclass import dataclass

if TYPE_CHECKING:
    from minicoord.server.answers import ParkedReply
    from minicoord.server.broker import Broker

P = TypeVar("P", bound="ParkedReply")

# Stand-in for the authorized-operations bitfields we are never asked to compute
# (kafka-python encodes None as Kafka's "not requested", INT32_MIN).
NOT_REQUESTED = None

# Kafka's principal for a connection that has not authenticated (PLAINTEXT, SSL without a
# client certificate).
ANONYMOUS = "User:ANONYMOUS"


class Parked(Protocol):
    """A reply completed later: `resolve(outcome)` builds and sends the response."""

    def resolve(self, outcome: Any) -> None: ...

    def set_build(self, build: Callable[[Any], Any]) -> None:
        """How the response is made, for a reply parked before its request was handled."""


class Channel(Protocol):
    """The connection side a handler may use."""

    client_host: str
    principal: str
    # The name of the listener the connection came in through.
    listener: str

    @property
    def hung_up(self) -> bool:
        """Whether the client closed the connection or its side of it: no request comes."""
        ...

    @property
    def corked(self) -> bool:
        """Whether answers given now wait for the end of the loop's turn (Broker.cork)."""
        ...

    @property
    def address(self) -> tuple[str, int]:
        """The address Metadata and FindCoordinator name: the listener's advertised one, else
        the one the client connected to."""
        ...

    def park(self, header: RequestHeader, spec: ApiSpec, build: Callable[[Any], Any]) -> Parked: ...

    def hold(self, header: RequestHeader, spec: ApiSpec, response: Any) -> Parked: ...

    def adopt(self, parked: P) -> P:
        """A reply the handler made itself (a ParkedReply subclass), as the request's."""
        ...

    def abort(self, reason: str) -> None:
        """Close the connection, logging why (acks=0 produce failures)."""


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    channel: Channel
    header: RequestHeader
    spec: ApiSpec

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def principal(self) -> str:
        return self.channel.principal

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def park(self, build: Callable[[Any], Any]) -> Parked:
        """A reply sent once `resolve(outcome)` is called; `build(outcome)` makes the response."""
        return self.channel.park(self.header, self.spec, build)

    def hold(self, response: Any) -> Parked:
        """A reply with `response` decided now, sent once `resolve` is called."""
        return self.channel.hold(self.header, self.spec, response)

    def adopt(self, parked: P) -> P:
        """`parked`, a reply that makes its own response (`ParkedReply.make`), as this one's."""
        return self.channel.adopt(parked)


HandleFn = Callable[[RequestContext, Any], Any]

# Returned by a handler for a request that gets no answer at all (Produce with acks=0).
NO_RESPONSE = object()
DecodeFn = Callable[[bytes, int], Any]


# Not frozen, though never changed once made: a frozen dataclass sets each field
# through object.__setattr__, which triples the cost of making one on a hot path.
@dataclass(slots=True)
class EncodedResponse:
    """A response body a hot-path handler encoded itself (see protocol/fast_heartbeat.py):
    bytes, or buffers to write in order (protocol/fast_fetch.py)."""

    body: bytes | list[bytes]
    error_code: int
    # The error codes inside it, partitions' included, for the errors metric (whose counts
    # would otherwise need the bytes decoded): one entry per place, NONE left out.
    errors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Handler:
    spec: ApiSpec
    handle: HandleFn
    min_version: int
    max_version: int
    # A hand-written decoder proven equal to the generated one; it must refuse (raise)
    # whatever the generated decoder plus the null checks would refuse.
    decode: DecodeFn | None = None

    @classmethod
    def for_spec(
        cls,
        spec: ApiSpec,
        handle: HandleFn,
        min_version: int | None = None,
        max_version: int | None = None,
        decode: DecodeFn | None = None,
    ) -> Handler:
        return cls(
            spec,
            handle,
            spec.min_version if min_version is None else min_version,
            spec.max_version if max_version is None else max_version,
            decode,
        )

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
