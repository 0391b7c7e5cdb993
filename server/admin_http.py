"""A small HTTP endpoint on the event loop: Prometheus metrics, and the control API.

Hand-rolled on asyncio streams rather than a framework: two route sets, one request per
connection, and it runs on the server's own loop so a scrape or a control call never races
the coordinator. Bound to loopback by default; it is a test and operator tool, not a service.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from minicoord.server.control_api import control_routes

if TYPE_CHECKING:
    # For annotations only: a server with just its control port on does without
    # prometheus_client.
    from minicoord.server.metrics import Metrics

log = logging.getLogger("minicoord.admin")

__all__ = ["control_routes", "metrics_routes", "start_http"]

Route = Callable[[dict[str, str]], tuple[int, str, bytes]]
MAX_HEAD = 16 * 1024


def metrics_routes(metrics: Metrics) -> dict[tuple[str, str], Route]:
    def scrape(_: dict[str, str]) -> tuple[int, str, bytes]:
        return 200, "text/plain; version=0.0.4; charset=utf-8", metrics.render()

    return {("GET", "/metrics"): scrape}


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
            # Blank values kept: an empty group= must be refused, not read as no group.
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            route = routes.get((method, url.path))
            if route is None:
                status, ctype, body = 404, "text/plain", b"not found\n"
            else:
                status, ctype, body = route(query)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            status, ctype, body = 400, "text/plain", b"bad request\n"
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict"}[status]
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
