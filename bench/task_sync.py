"""How the Spark tasks of one barrier stage line up (`Barrier`: Spark's allGather, a common
start past its lag) and how a task's simulated members reach the server (`ConnectionPool`).

Imported inside the Python workers: no pyspark at module level.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from minicoord.clients.connection import ProtocolClient
from minicoord.clients.timings import EPOCH_OFFSET

CONNECT_CONCURRENCY = 256  # connects in flight per task: stays well inside the listen backlog
START_LEAD_S = 0.3  # common start at least this far after the last task reported ready
FIRST_GATHER_LAG_S = 1.05  # Spark's allGather lag before a task has seen one (local mode)
LAG_MARGIN = 1.2


class Barrier:
    """allGather across the tasks of one barrier stage; trivial when there is one task.

    Spark answers an allGather up to about a second after the last task called it, and not
    at the same moment in every task (measured in local mode: 0.1 s in one task, 1.0 s in the
    other). So every gather carries each task's clock and the worst lag it has seen, and a
    common start is set that far (with a margin) after the last task got there: otherwise
    one task would start its timed window most of a second after another.
    """

    def __init__(self, tasks: int) -> None:
        self._ctx: Any = None
        self._lag = 0.0  # the most this task's allGather answers came after the last call
        self._lags: list[float] = []  # every task's, as of the last gather
        self._calls: list[float] = []  # when each task called the last gather (epoch s)
        if tasks > 1:
            from pyspark import BarrierTaskContext

            self._ctx = BarrierTaskContext.get()

    async def gather(self, message: str) -> list[str]:
        if self._ctx is None:
            self._calls = [time.time()]
            return [message]
        stamped = f"{time.time()!r}|{self._lag!r}|{message}"
        # Blocking call: a thread keeps the loop (and the members' heartbeats) running.
        answers = await asyncio.get_running_loop().run_in_executor(
            None, self._ctx.allGather, stamped
        )
        answered = time.time()
        parts = [a.split("|", 2) for a in answers]
        self._lag = max(self._lag, answered - max(float(p[0]) for p in parts))
        self._lags = [float(p[1]) for p in parts]
        self._calls = [float(p[0]) for p in parts]
        return [p[2] for p in parts]

    def lead(self) -> float:
        """How long after the last task's call a common start can be: the same in every
        task, as it depends only on what all of them reported."""
        if self._ctx is None:
            return START_LEAD_S
        worst = max(self._lags) if self._lags and max(self._lags) > 0 else FIRST_GATHER_LAG_S
        return max(START_LEAD_S, worst * LAG_MARGIN + START_LEAD_S / 2)

    async def common_start(self) -> float:
        """A perf_counter instant shortly after every task got here; sleeps until it."""
        await self.gather("start")
        return await self.start_after_last_gather()

    async def start_after_last_gather(self) -> float:
        """common_start without a gather of its own: the one just made is the rendezvous
        (a scenario that gathers anyway saves Spark's second of lag)."""
        start = max(self._calls) + self.lead() - EPOCH_OFFSET
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        return start

    async def all_ok(self, ok: bool) -> bool:
        return all(flag == "1" for flag in await self.gather("1" if ok else "0"))


class ConnectionPool:
    """Connections for members: one per member, or one shared by every `per_conn` members.

    Slots are a task's member positions; with sharing, consecutive slots (the members of one
    group, as plans list them) share a connection. minicoord, like Kafka, answers a
    connection's requests in order, so a JoinGroup parked for its group holds back the other
    answers on its connection: sharing is for heartbeat-heavy loads, not join storms of
    unrelated groups.
    """

    def __init__(self, mode: str, per_conn: int, client_id: str) -> None:
        self.mode = mode
        self.per_conn = max(1, per_conn)
        self.client_id = client_id
        self._conns: dict[tuple[str, int, int], ProtocolClient] = {}
        self._opening: dict[tuple[str, int, int], asyncio.Future[ProtocolClient]] = {}
        self._limit = asyncio.Semaphore(CONNECT_CONCURRENCY)

    def _key(self, slot: int, host: str, port: int) -> tuple[str, int, int]:
        return host, port, slot if self.mode == "per-member" else slot // self.per_conn

    async def get(self, slot: int, host: str, port: int) -> ProtocolClient:
        key = self._key(slot, host, port)
        conn = self._conns.get(key)
        if conn is not None:
            return conn
        pending = self._opening.get(key)
        if pending is not None:
            return await pending
        future: asyncio.Future[ProtocolClient] = asyncio.get_running_loop().create_future()
        self._opening[key] = future
        try:
            async with self._limit:
                conn = await ProtocolClient.connect(host, port, f"{self.client_id}-{key[2]}")
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when none waits
            del self._opening[key]
            raise
        self._conns[key] = conn
        del self._opening[key]
        future.set_result(conn)
        return conn

    async def open(self, slots: range, host: str, port: int) -> None:
        await asyncio.gather(*(self.get(s, host, port) for s in slots))

    def __len__(self) -> int:
        return len(self._conns)

    async def close(self) -> None:
        conns = list(self._conns.values())
        self._conns.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
