"""A small HTTP endpoint on the event loop: Prometheus metrics, and the control API.

Hand-rolled on asyncio streams rather than a framework: two routes sets, one request per
connection, and it runs on the server's own loop so a scrape or a control call never races
the coordinator. Bound to loopback by default; it is a test and operator tool, not a service.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from minicoord.server.faults import Controller
from minicoord.server.metrics import Metrics

log = logging.getLogger("minicoord.admin")

Route = Callable[[dict[str, str]], tuple[int, str, bytes]]
MAX_HEAD = 16 * 1024


def metrics_routes(metrics: Metrics) -> dict[tuple[str, str], Route]:
    def scrape(_: dict[str, str]) -> tuple[int, str, bytes]:
        return 200, "text/plain; version=0.0.4; charset=utf-8", metrics.render()

    return {("GET", "/metrics"): scrape}


def control_routes(control: Controller) -> dict[tuple[str, str], Route]:
    def action(fn: Callable[[dict[str, str]], Any]) -> Route:
        def route(query: dict[str, str]) -> tuple[int, str, bytes]:
            try:
                result = fn(query)
            except (KeyError, ValueError) as exc:
                message = f"missing parameter {exc}" if isinstance(exc, KeyError) else str(exc)
                body = json.dumps({"ok": False, "error": message})
                return 400, "application/json", body.encode()
            return 200, "application/json", json.dumps({"ok": True, "result": result}).encode()

        return route

    def opt_int(q: dict[str, str], name: str) -> int | None:
        return int(q[name]) if name in q else None

    return {
        ("POST", "/rebalance"): action(lambda q: control.force_rebalance(q["group"])),
        ("POST", "/expire"): action(lambda q: control.expire_member(q["group"], q["member"])),
        ("POST", "/fail"): action(
            lambda q: control.fail_next(
                q["api"], int(q.get("count", "1")), q["error"], q.get("group"), q.get("client")
            )
        ),
        ("POST", "/cut"): action(
            lambda q: control.cut_connection(
                q["api"], int(q.get("count", "1")), q.get("before", "false") != "true"
            )
        ),
        ("POST", "/latency"): action(
            lambda q: control.add_latency(q["api"], int(q["ms"]), opt_int(q, "duration_ms"))
        ),
        ("POST", "/moved"): action(
            lambda q: control.coordinator_moved(int(q["duration_ms"]), q.get("group"))
        ),
        ("POST", "/loading"): action(
            lambda q: control.coordinator_loading(int(q["duration_ms"]), q.get("group"))
        ),
        ("POST", "/clear"): action(lambda q: control.clear()),
    }


async def start_http(
    routes: dict[tuple[str, str], Route], host: str, port: int
) -> asyncio.base_events.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if len(head) > MAX_HEAD:
                raise ValueError("request head too large")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            url = urlsplit(target)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            route = routes.get((method, url.path))
            if route is None:
                status, ctype, body = 404, "text/plain", b"not found\n"
            else:
                status, ctype, body = route(query)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            status, ctype, body = 400, "text/plain", b"bad request\n"
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        try:
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEAD)
