"""Listening before loading: the sockets of a server that cannot fail once they are bound.

`minicoord serve --in-memory` on PLAINTEXT listeners has nothing left to refuse after its
config parsed and its ports bound: no data directory to lock or replay, no key store to read,
no users or ACLs to parse, no HTTP ports to bind. Such a server binds first and prints its
ready line, and only then imports the coordinator and the data path (most of its start-up
time). A client that connects meanwhile waits in the listen backlog and is answered as soon as
the loop runs, so the line still means what it says: connect now.
"""

from __future__ import annotations

import signal
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minicoord.server.security.listeners import Listener

BACKLOG = 1024

# SIGTERM or SIGINT while loading, after the ready line: serve() stops as soon as it runs.
stop_requested = False


def _request_stop(signum: int, frame: object) -> None:
    global stop_requested
    stop_requested = True


def catch_stop_signals() -> None:
    """Until the event loop takes them over: a script may stop us once it has read the line."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _request_stop)


def can_listen_early(listeners: list[Listener], in_memory: bool, risky: bool) -> bool:
    """Whether nothing can fail after binding (`risky`: ACLs, users, admin ports given)."""
    if not in_memory or risky:
        return False
    for lst in listeners:
        if lst.protocol != "PLAINTEXT":
            return False
        if packed_ip(lst.host) is None:  # a name or "" (every interface): asyncio resolves it
            return False
    return True


def packed_ip(host: str) -> bytes | None:
    """The packed form of an IPv4 or IPv6 literal (an IPv6 zone, `%eth0`, ignored); None for
    anything else. The socket module's parser, not `ipaddress`: that module costs serve about
    0.3 MB of resident memory for the two questions asked of it at start."""
    try:
        return socket.inet_pton(socket.AF_INET, host)
    except (OSError, ValueError):
        pass
    try:
        return socket.inet_pton(socket.AF_INET6, host.partition("%")[0])
    except (OSError, ValueError):
        return None


def bind(listeners: list[Listener]) -> list[socket.socket]:
    """One listening socket per listener, in order (OSError if a port cannot be bound); each
    host an IP literal (packed_ip).

    A server that loads first binds its IP literals here too: asyncio's create_server would
    resolve them through libuv's thread pool (four threads for the life of the process) and
    encode them with the IDNA codec, which imports unicodedata and stringprep.
    """
    sockets: list[socket.socket] = []
    try:
        for lst in listeners:
            family = socket.AF_INET6 if ":" in lst.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            # As asyncio's create_server(reuse_address=True): a restart may rebind at once,
            # and an IPv6 address is served on IPv6 alone.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind((lst.host, lst.port))
            except OSError as exc:
                # Named as asyncio names a bind that failed: which of several ports it was.
                raise OSError(
                    exc.errno,
                    f"error while attempting to bind on address {(lst.host, lst.port)!r}: "
                    f"{(exc.strerror or str(exc)).lower()}",
                ) from exc
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def bound(sockets: list[socket.socket]) -> list[tuple[str, int]]:
    return [sock.getsockname()[:2] for sock in sockets]
