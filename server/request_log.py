"""The request log: what each client asked and what it was answered (`minicoord.requests`).

Two kinds of line, on one logger:

- DEBUG, one per request, written when it is answered (a parked reply answers later, so its
  time is taken then): client address and id, API and version, the groups, member and topics
  the request names, every error code in the answer by name, and the milliseconds from the
  decoded request to its answer.
- INFO, for a request refused in a way the client cannot recover from by retrying (an API or
  version we do not serve, a group or producer request the group and produce paths refuse,
  a transaction when none are served...; the admin APIs' refusals are in their answers). A
  client in a retry loop would write one per attempt, so these are limited to one per
  client, API and reason per window, the next one saying how many were held back.

Cost when DEBUG is off: `Broker.request_log` is None and the connection reads that one
attribute per request; nothing here runs. It is recomputed by `refresh` when the level can
have changed (server start, `minicoord ctl log-level`), never per request. The INFO lines are
written only from the branches that refuse, which an answered request never takes.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.answers import API_VERSIONS_KEY

if TYPE_CHECKING:
    from minicoord.protocol.apis import ApiSpec
    from minicoord.protocol.headers import RequestHeader
    from minicoord.server.broker import Broker
    from minicoord.server.connection import KafkaConnection
    from minicoord.server.handlers.base import Handler, RequestContext
    from minicoord.server.metrics import Metrics

log = logging.getLogger("minicoord.requests")

# Answers a client cannot get past by retrying the same request: its configuration (or the
# server) must change. Used to word the INFO lines and by the handlers that refuse.
UNRECOVERABLE = frozenset(
    {
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        ErrorCode.INVALID_TXN_STATE,
    }
)
# One INFO line per client, API and reason per this many seconds.
REFUSAL_WINDOW_S = 60.0
# Distinct (client, API, reason) keys remembered; beyond, the oldest windows are dropped.
MAX_REFUSAL_KEYS = 4096


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def api_name(api_key: int) -> str:
    spec = SPECS.get(api_key)
    if spec is not None:
        return spec.name
    try:
        from kafka.protocol.api_key import ApiKey

        return ApiKey(api_key).name
    except (ImportError, ValueError):
        return f"ApiKey{api_key}"


@dataclass(slots=True)
class _Window:
    started: float
    held_back: int = 0


class Refusals:
    """Rate-limited INFO lines for refusals, per (client host, client id, API, reason)."""

    def __init__(self, window_s: float = REFUSAL_WINDOW_S) -> None:
        self.window_s = window_s
        self._windows: dict[tuple[str, str, str, str], _Window] = {}

    def note(
        self,
        peer: str,
        client_id: str | None,
        api: str,
        version: int,
        reason: str,
        detail: str | None = None,
        group: str | None = None,
    ) -> bool:
        """Log the refusal unless this client had the same one within the window; True if
        a line was written."""
        if not log.isEnabledFor(logging.INFO):
            return False
        # The host, not the port: a client retrying on a new connection is the same client.
        host = peer.rsplit(":", 1)[0]
        key = (host, client_id or "", api, reason)
        now = time.monotonic()
        window = self._windows.get(key)
        if window is not None and now - window.started < self.window_s:
            window.held_back += 1
            return False
        held_back = window.held_back if window is not None else 0
        if len(self._windows) >= MAX_REFUSAL_KEYS:
            self._expire(now)
        self._windows[key] = _Window(now)
        text = f"refused {api} v{version} from {peer} client_id={_quote(client_id or '')}: {reason}"
        if detail:
            text += f" ({detail})"
        if held_back:
            # Held back since the last line like it, which may be long before this one.
            text += f"; {held_back} more like it since the last line like it, not logged"
        fields = {
            "event": "refused",
            "api": api,
            "api_version": version,
            "peer": peer,
            "client_id": client_id,
            "reason": reason,
            "held_back": held_back,
        }
        if group is not None:
            fields["group"] = [group]  # a list, as a request line's (a request may name several)
        log.info(text, extra=fields)
        return True

    def consumer_group_heartbeat(
        self,
        client_id: str,
        client_host: str,
        version: int,
        error: ErrorCode,
        message: str | None,
        group: str,
    ) -> None:
        """The coordinator refused a ConsumerGroupHeartbeat (its hot path stays untouched:
        this runs only in the branch that refuses)."""
        if error in UNRECOVERABLE:
            self.note(
                client_host.lstrip("/"),
                client_id,
                "ConsumerGroupHeartbeat",
                version,
                error.name,
                message,
                group,
            )

    def _expire(self, now: float) -> None:
        windows = self._windows
        for key in [k for k, w in windows.items() if now - w.started >= self.window_s]:
            del windows[key]
        if len(windows) >= MAX_REFUSAL_KEYS:
            windows.clear()


def refused(
    ctx: RequestContext, error: ErrorCode, detail: str | None = None, group: str | None = None
) -> None:
    """A handler refusing a request the client cannot get past: one rate-limited INFO line
    (with the group the request names, if any, as a field of its JSON form)."""
    peer = getattr(ctx.channel, "peer", "unknown")
    ctx.broker.refusals.note(
        peer, ctx.header.client_id, ctx.spec.name, ctx.version, error.name, detail, group
    )


def unsupported_version(broker: Broker, peer: str, header: RequestHeader, handler: Handler) -> None:
    """A version outside the range we advertise: the connection is closed, as Kafka's
    SocketServer closes it, and this line is the only word of it (ApiVersions excepted:
    answering it at v0 is how versions are negotiated, KIP-511)."""
    if handler.spec.key == API_VERSIONS_KEY:
        return
    broker.refusals.note(
        peer,
        header.client_id,
        handler.spec.name,
        header.api_version,
        "UNSUPPORTED_VERSION",
        f"minicoord serves v{handler.min_version}-{handler.max_version}; connection closed",
    )


def unserved(broker: Broker, peer: str, header: RequestHeader) -> None:
    """An API key with no handler: the connection is closed (as Kafka does for an API key it
    does not know), and this line is the only word of it."""
    broker.refusals.note(
        peer,
        header.client_id,
        api_name(header.api_key),
        header.api_version,
        f"API key {header.api_key} is not one minicoord serves (not in its ApiVersions)",
        "connection closed",
    )


# The running servers of this process. Log levels are the process's (Python's logging), so a
# level set through one server turns the request log on or off in every one of them.
_running: weakref.WeakSet[Broker] = weakref.WeakSet()


def refresh(broker: Broker) -> None:
    """Turn the per-request DEBUG lines on or off to match the logger's level now."""
    _running.add(broker)
    broker.request_log = RequestLog(broker) if log.isEnabledFor(logging.DEBUG) else None


def refresh_all() -> None:
    """`refresh` every running server of the process (a log level changed)."""
    for broker in list(_running):
        refresh(broker)


def forget(broker: Broker) -> None:
    """The server stopped."""
    _running.discard(broker)


def observer(
    broker: Broker, conn: KafkaConnection, header: RequestHeader, spec: ApiSpec, request: Any
) -> Callable[[Any], None]:
    """The hook each answer passes through when it is sent, parked or not: the request log's
    while DEBUG is on, else the metrics' alone (the connection asks only when one is on)."""
    metrics = broker.metrics
    if broker.request_log is not None:
        # The client's address only for the log line: metrics alone do not ask for it.
        return broker.request_log.observer(conn.peer, header, spec, request, metrics)
    assert metrics is not None
    api_key = spec.key
    histogram = metrics.on_request(api_key, header.api_version)
    started = time.perf_counter()
    return lambda response: metrics.on_response(
        api_key, response, time.perf_counter() - started, histogram
    )


class RequestLog:
    """The DEBUG line of each answered request (present only while DEBUG is on)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def observer(
        self,
        peer: str,
        header: RequestHeader,
        spec: ApiSpec,
        request: Any,
        metrics: Metrics | None,
    ) -> Callable[[Any], None]:
        """The connection's answer hook while DEBUG is on (metrics fed as well, if enabled)."""
        api_key = spec.key
        histogram = metrics.on_request(api_key, header.api_version) if metrics else None
        started = time.perf_counter()

        def observe(response: Any) -> None:
            seconds = time.perf_counter() - started
            if metrics is not None:
                metrics.on_response(api_key, response, seconds, histogram)
            self.answered(peer, header, spec, request, response, seconds)

        return observe

    def answered(
        self,
        peer: str,
        header: RequestHeader,
        spec: ApiSpec,
        request: Any,
        response: Any,
        seconds: float,
    ) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            return
        try:
            fields = request_fields(spec.key, request, self.broker)
            errors, message = (
                answer_errors(spec, header.api_version, response)
                if response is not None
                else ([], None)
            )
        except Exception as exc:  # a log line must never fail a request
            fields, errors, message = {}, [], f"<not described: {exc!r}>"
        error = ",".join(errors) if errors else "NONE"
        if response is None:
            error = "no answer (acks=0)"
        ms = round(seconds * 1000, 3)
        parts = [
            f"{spec.name} v{header.api_version}",
            f"peer={peer}",
            f"client_id={_quote(header.client_id or '')}",
        ]
        parts += [f"{k}={_quote(','.join(v))}" for k, v in fields.items() if v]
        parts.append(f"error={error if response is not None else _quote(error)}")
        if message:
            parts.append(f"message={_quote(message)}")
        parts.append(f"ms={ms}")
        log.debug(
            " ".join(parts),
            extra={
                "event": "request",
                "api": spec.name,
                "api_version": header.api_version,
                "peer": peer,
                "client_id": header.client_id,
                "correlation_id": header.correlation_id,
                **{k: v for k, v in fields.items() if v},
                "error": error,
                "ms": ms,
            },
        )


def _quote(text: str) -> str:
    """Bare when it reads unambiguously in a key=value line, else JSON-quoted."""
    if text and all(c.isalnum() or c in "-_.:/,@" for c in text):
        return text
    import json  # here, not at start: a fifth of a megabyte a server rarely needs

    return json.dumps(text)


def request_fields(
    api_key: int, request: Any, broker: Broker | None = None
) -> dict[str, list[str]]:
    """The groups, member and topics a request names (what a person greps the log for)."""
    from minicoord.server.faults import group_ids_of

    out: dict[str, list[str]] = {}
    groups = [g for g in group_ids_of(api_key, request) if isinstance(g, str)]
    if groups:
        out["group"] = groups
    member = getattr(request, "member_id", None)
    if member:
        out["member"] = [member]
    elif api_key == 13 and getattr(request, "members", None):  # LeaveGroup v3+: a batch
        out["member"] = [m.member_id for m in request.members if m.member_id]
    elif api_key == 9 and getattr(request, "groups", None):  # OffsetFetch v8+: per group
        members = [getattr(g, "member_id", None) for g in request.groups]
        if any(members):
            out["member"] = [m for m in members if m]
    instance = getattr(request, "group_instance_id", None) or getattr(request, "instance_id", None)
    if instance:
        out["instance"] = [instance]
    transactional = getattr(request, "transactional_id", None)
    if transactional:
        out["transactional_id"] = [transactional]
    topics = _topics(api_key, request, broker)
    if topics:
        out["topics"] = topics
    return out


def _topics(api_key: int, request: Any, broker: Broker | None) -> list[str]:
    if api_key == 68:  # ConsumerGroupHeartbeat: a subscription, sent when it changed
        subscribed = list(getattr(request, "subscribed_topic_names", None) or [])
        regex = getattr(request, "subscribed_topic_regex", None)
        return subscribed + ([f"/{regex}/"] if regex else [])
    if api_key == 3 and getattr(request, "topics", None) is None:
        return ["*"]  # Metadata for every topic (v1+; v0 asks for all with an empty list)
    items = getattr(request, "topic_data", None) if api_key == 0 else None
    if api_key == 9 and getattr(request, "groups", None):  # OffsetFetch v8+: per group
        items = [t for g in request.groups for t in g.topics or ()]
    if items is None:
        items = getattr(request, "topics", None)
    if items is None and api_key == 20:  # DeleteTopics before v6
        items = getattr(request, "topic_names", None)
    names: list[str] = []
    for item in items or ():
        if isinstance(item, str):
            names.append(item)
            continue
        name = getattr(item, "name", None) or getattr(item, "topic", None)
        if not name:
            topic_id = getattr(item, "topic_id", None)
            topic = broker.topics.by_id(topic_id) if broker is not None and topic_id else None
            name = topic.name if topic is not None else str(topic_id) if topic_id else None
        if name and name not in names:
            names.append(name)
    return names


def answer_errors(spec: ApiSpec, version: int, response: Any) -> tuple[list[str], str | None]:
    """Every distinct error code in an answer, by name, and its top-level message if any."""
    from minicoord.server.handlers.base import EncodedResponse

    if type(response) is EncodedResponse:
        body = response.body
        try:
            # Hand-encoded answers (Heartbeat, OffsetCommit, Fetch) carry their errors only
            # in their bytes; read them back with the generated codec (DEBUG only).
            raw = b"".join(body) if isinstance(body, list) else body
            response = spec.response.decode(memoryview(raw), version=version)
        except Exception:
            code = response.error_code
            return ([error_name(code)] if code else []), None
    codes: list[int] = []
    _walk(response, codes)
    message = getattr(response, "error_message", None)
    return [error_name(c) for c in codes], message if isinstance(message, str) else None


def _walk(obj: Any, codes: list[int], distinct: bool = True) -> None:
    """The error codes in a response object, NONE left out: each once, or (not `distinct`)
    once per place it appears, as Kafka's errorCounts counts them."""
    fields = getattr(getattr(obj, "_struct", None), "fields", None)
    if not fields:
        return
    for name in dict(fields):
        value = getattr(obj, name, None)
        # AddPartitionsToTxn's per-partition errors go by another name (Kafka's errorCounts
        # counts them; not CreateTopics' topic_config_error_code, which it leaves out).
        if name == "error_code" or name == "partition_error_code":
            if value and not (distinct and value in codes):
                codes.append(int(value))
        elif isinstance(value, list):
            for item in value:
                _walk(item, codes, distinct)
        elif value is not None and hasattr(value, "_struct"):
            _walk(value, codes, distinct)


def error_counts(response: Any) -> list[int]:
    """Every error code in an answer, once per place (the errors metric's counts)."""
    from minicoord.server.handlers.base import EncodedResponse

    if type(response) is EncodedResponse:
        if response.errors:
            return list(response.errors)
        return [response.error_code] if response.error_code else []
    codes: list[int] = []
    _walk(response, codes, distinct=False)
    return codes
