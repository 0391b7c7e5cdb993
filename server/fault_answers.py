"""How an injected fault (faults.py) reaches a connection's answer: the error answered in the
handler's place, or a connection closed when no answer could carry it, and an answer held
back for an injected latency. The connection calls these only while some rule is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minicoord.server.answers import ParkedReply
from minicoord.server.faults import can_fail, error_response
from minicoord.server.handlers.base import NO_RESPONSE

if TYPE_CHECKING:
    from minicoord.protocol.apis import ApiSpec
    from minicoord.protocol.headers import RequestHeader
    from minicoord.server.connection import KafkaConnection


def injected_answer(
    conn: KafkaConnection, spec: ApiSpec, header: RequestHeader, request: Any
) -> tuple[Any, int]:
    """A test's injected failure response (or None) and latency for this request."""
    faults = conn.broker.faults
    error = faults.injected_error(spec.key, header.client_id, request)
    response = None
    if error is not None:
        # Answered before the handler runs: an injected failure changes no state.
        if not can_fail(spec.key, header.api_version) or (spec.key == 0 and request.acks == 0):
            # No answer could carry the error (or none is awaited, as for acks=0):
            # the client sees a failed connection instead, as on a real broker fault.
            conn.abort(
                f"injected fault: {spec.name} v{header.api_version} failed with "
                f"{error.name}, which its answer cannot carry"
            )
            return NO_RESPONSE, 0
        response = error_response(spec, header.api_version, request, error)
    return response, faults.delay_ms(spec.key, conn.broker.now())


def delayed_answer(
    conn: KafkaConnection, header: RequestHeader, spec: ApiSpec, out: Any, delay_ms: int
) -> ParkedReply:
    """`out` (an answer, or a parked reply) parked to go out `delay_ms` from now."""
    if isinstance(out, ParkedReply):
        if out.data is None:
            out.delay_ms = delay_ms
            return out
        # Already answered inside the handler: hold the encoded answer back instead.
        held = conn.park(header, spec, lambda _: None)
        data = out.data
        conn.broker.call_later(delay_ms, lambda: held.fill(data))
        return held
    parked = conn.park(header, spec, lambda _: out)
    parked.delay_ms = delay_ms
    parked.resolve(None)  # schedules the real answer delay_ms from now
    return parked
