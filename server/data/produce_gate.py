"""Produce requests held while topic partitions load at start, handled in arrival order.

A Kafka broker reads no request before its logs are loaded, so a producer's pipeline never
meets a partition that turns from unavailable to served between two of its requests.
minicoord serves while its logs load (server/loading.py), and answering such a Produce
NOT_LEADER_OR_FOLLOWER did split a pipeline: an idempotent producer's first batches were
refused, a later one met the loaded partition with a gap in its sequence
(OUT_OF_ORDER_SEQUENCE_NUMBER), and librdkafka then bumped its epoch and sent its unanswered
batches again under new sequence numbers, writing twice those a crash had written but not
acknowledged. So a Produce naming a partition still loading waits, as it would at Kafka's
socket, and every Produce after it waits behind it (a producer's order across partitions and
connections is kept too); each is handled as its partitions are installed, first come first,
unless its client hung up meanwhile (then it is dropped unwritten: see `loaded`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minicoord.server.handlers.base import NO_RESPONSE

if TYPE_CHECKING:
    from minicoord.server.handlers.base import Parked, RequestContext
    from minicoord.server.topics import TopicRegistry

TopicPartition = tuple[str, int]
# How a held request is handled once it can be: the Produce handler, given the reply parked
# for it (None with acks=0, which has none).
Respond = Callable[["RequestContext", Any, "Parked | None"], Any]


class ProduceGate:
    def __init__(self, loading: set[TopicPartition], topics: TopicRegistry) -> None:
        self.loading = loading
        self._topics = topics
        self._held: deque[tuple[RequestContext, Any, Parked | None, Respond]] = deque()

    def holds(self, request: Any, by_id: bool) -> bool:
        """Whether `request` must wait: something waits already, or it names a partition
        that is still loading."""
        return bool(self._held) or self._names_loading(request, by_id)

    def hold(self, ctx: RequestContext, request: Any, respond: Respond) -> Any:
        """Hold `request`; its reply (kept in its place among the connection's answers), or
        nothing for acks=0."""
        parked = None if request.acks == 0 else ctx.hold(None)  # its build set when handled
        self._held.append((ctx, request, parked, respond))
        return NO_RESPONSE if parked is None else parked

    def loaded(self, tp: TopicPartition) -> None:
        """`tp` is served now (or will not be): handle what waited for it, in order, up to
        the first request still naming a loading partition. A request whose client hung up
        meanwhile is dropped unwritten (and the connection closed): the client gave up on it
        (a request timeout closes the connection) and sends it again elsewhere, so writing it
        too would store a plain producer's batch twice."""
        self.loading.discard(tp)
        held = self._held
        while held:
            ctx, request, parked, respond = held[0]
            if ctx.channel.hung_up:
                held.popleft()
                ctx.channel.abort(
                    "the client hung up while its Produce waited for a loading partition; "
                    "the Produce is dropped unwritten"
                )
                continue
            if self._names_loading(request, ctx.version >= 13):
                return
            held.popleft()
            respond(ctx, request, parked)

    def _names_loading(self, request: Any, by_id: bool) -> bool:
        for t in request.topic_data:
            if by_id:
                topic = self._topics.by_id(t.topic_id)
                name = topic.name if topic is not None else None
            else:
                name = t.name
            if any((name, p.index) in self.loading for p in t.partition_data):
                return True
        return False
