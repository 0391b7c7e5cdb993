"""The thread a server opens and cleans its logs in, and the interpreter lock it shares.

Loading a partition and preparing a cleaning are Python work: moved off the event loop, they
still hold the interpreter's lock. CPython hands the lock to a waiting thread only after the
switch interval (5 ms by default), and the event loop waits for it again after each poll, so
every request waited a turn or more. While a 600,000-record offsets partition loaded,
ApiVersions round trips on one connection (0.5 ms once loaded) took 5.7 ms at the median and
11-16 ms at the 99th percentile; the cleaner stalled the loop for up to 11-12 ms. For as long
as such work runs, the interval is 0.5 ms: the same round trips took 1.1 ms and 2-3 ms, the
stall 5.6 ms (`python -m minicoord.bench.log_bench --policies --measures loading compaction
--records 600000 --keys 3000`, two runs each). A thread that no request waits on is not asked
to switch, so loading on its own is no slower.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# While storage work runs: short enough that a request waits no more than a few of these
# for the lock, long enough that the switches themselves cost the work little.
SHARING_SWITCH_INTERVAL_S = 0.0005

# Storage calls running in this process, over all its servers (a process may embed several,
# each on its own loop and thread, hence the lock), and the interval to give back when the
# last ends.
_running = 0
_saved_interval = 0.0
_counting = threading.Lock()


class StorageThread:
    """One worker thread; its calls run one at a time, in the order they were made."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "minicoord-storage")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in the thread, with the lock shared at the short interval meanwhile."""
        global _running, _saved_interval
        with _counting:
            if _running == 0:
                _saved_interval = sys.getswitchinterval()
                if _saved_interval > SHARING_SWITCH_INTERVAL_S:
                    sys.setswitchinterval(SHARING_SWITCH_INTERVAL_S)
            _running += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        finally:
            # Also when the awaiting task is cancelled and fn still runs: a server that stops
            # waits for its thread (shutdown), and the host's interval is its own again.
            with _counting:
                _running -= 1
                if _running == 0 and _saved_interval > SHARING_SWITCH_INTERVAL_S:
                    # The interpreter keeps whole microseconds and truncates what it is given:
                    # half of one more gives back exactly the interval it had (0.9 s reads
                    # back as 0.8999999999999999, which set as it is would be 899,999 µs).
                    sys.setswitchinterval(_saved_interval + 0.5e-6)

    def shutdown(self) -> None:
        """Wait for the call under way, if any; run no more."""
        self._pool.shutdown(wait=True)
