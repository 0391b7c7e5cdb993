"""Logger levels a running server changed, and putting them back when it stops.

A server's loggers change level at an operator's word (`minicoord ctl log-level`, the control
API) or a client's (IncrementalAlterConfigs on the BROKER_LOGGER resource). Levels are the
process's (Python's logging), so embedded servers of one process share them: each change is
recorded here under the server that made it, and once every server that changed a logger has
stopped, the logger gets back the level it had before the first change (a later test's
server must not log what an earlier one asked for), whichever order they stop in. The
request log's on/off flag is recomputed after every change: the one place it is, while
servers run.
"""

from __future__ import annotations

import logging

# Each changed logger: its level before the first change, and the servers (by id) that
# changed it since.
_CHANGED: dict[logging.Logger, tuple[int, set[int]]] = {}


def set_level(server: object, logger: logging.Logger, level: int | str) -> None:
    """Give `logger` a level (NOTSET: its parent's) on behalf of `server`."""
    from minicoord.server import request_log

    _CHANGED.setdefault(logger, (logger.level, set()))[1].add(id(server))
    logger.setLevel(level)
    request_log.refresh_all()


def restore(server: object) -> None:
    """`server` is stopping: every logger no running server changed any more gets back its
    level from before."""
    from minicoord.server import request_log

    owner = id(server)
    restored = False
    for logger, (original, owners) in list(_CHANGED.items()):
        if owner in owners:
            owners.discard(owner)
            if not owners:
                del _CHANGED[logger]
                logger.setLevel(original)
                restored = True
    if restored:
        request_log.refresh_all()
