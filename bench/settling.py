"""When a task's members count as settled in a group of the expected size, for either
protocol.

- classic: the leader writes the size of the generation into every assignment
  (clients/member.py), so a member is settled once it holds an assignment of a generation of
  the expected size: its own answer says so.
- consumer protocol: a member is never told how many members its group has. A group is
  settled when ConsumerGroupDescribe shows it Stable with every one of the expected members at
  the group epoch and every partition owned exactly once (`GroupSnapshot.settled`), and a
  member of this task only once it saw that epoch itself and holds the partitions the server
  says it has (a member at the epoch may still be waiting for partitions another released).
  One poller per group per task asks, on a connection of its own, and only when this task's
  members of the group look settled (all assigned, one epoch among them), at most every
  `DESCRIBE_POLL_S`. Its requests are not members' requests: they go to no Recorder row,
  only to the `describe_polls` gauge.

A settled member's time is its own: when it last changed (its latest assignment, or its move
to the final epoch), not when the poller noticed. The group did not change between that
instant and the poll that found it settled, so the poll's timing costs no precision.

Imported inside the Python workers: no pyspark at module level.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from minicoord.bench.protocol_members import CONSUMER
from minicoord.clients.connection import ProtocolClient
from minicoord.clients.consumer_member import describe_group

DESCRIBE_POLL_S = 0.1
MAX_POLLS = 100_000  # a bound on every poll loop (at 0.1 s: hours, longer than any timeout)


class Describer:
    """The task's connection for ConsumerGroupDescribe polls, opened on first use."""

    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._conn: ProtocolClient | None = None
        self.polls = 0  # requests sent, for the describe_polls gauge

    async def describe(self, group_id: str) -> Any:
        if self._conn is None:
            self._conn = await ProtocolClient.connect(self.host, self.port, self.client_id)
        self.polls += 1
        return await describe_group(self._conn, group_id)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


class Settling:
    """Watches `sims` until each is settled at `expected(sim)` members (or failed).

    `on_settled(sim, t)` is called once per member, `t` its settle time (perf_counter).
    Members that failed are reported with `fail(sim)` by the caller and count as done.
    """

    def __init__(
        self,
        sims: list[Any],
        protocol: str,
        expected: Callable[[Any], int],
        partitions: int,
        describer: Describer | None,
        on_settled: Callable[[Any, float], None],
        after: float = 0.0,
    ) -> None:
        self.protocol = protocol
        self.expected = expected
        self.partitions = partitions
        self.describer = describer
        self.on_settled = on_settled
        self.after = after  # only changes from this instant on count (a newcomer's round)
        self.pending: dict[int, Any] = {id(s.member): s for s in sims}
        self.done = asyncio.Event()
        if not self.pending:
            self.done.set()
        if protocol != CONSUMER:
            for s in sims:
                s.member.on_assigned = self._on_assigned

    def _settle(self, sim: Any, t: float) -> None:
        if self.pending.pop(id(sim.member), None) is None:
            return
        self.on_settled(sim, t)
        if not self.pending:
            self.done.set()

    def fail(self, sim: Any) -> None:
        if self.pending.pop(id(sim.member), None) is not None and not self.pending:
            self.done.set()

    def _on_assigned(self, member: Any) -> None:
        sim = self.pending.get(id(member))
        if sim is not None and member.group_size >= self.expected(sim):
            self._settle(sim, member.assigned_at)

    async def wait(self, timeout: float) -> bool:
        """True once every member settled or failed; False after `timeout` seconds."""
        poller = None
        if self.protocol == CONSUMER:
            poller = asyncio.ensure_future(self._poll())
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            if poller is not None:
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)

    async def _poll(self) -> None:
        assert self.describer is not None
        for _ in range(MAX_POLLS):
            by_group: dict[str, list[Any]] = {}
            for sim in self.pending.values():
                by_group.setdefault(sim.member.group_id, []).append(sim)
            if not by_group:
                return
            for group_id, sims in by_group.items():
                if self._looks_settled(sims):
                    await self._check(group_id, sims)
            await asyncio.sleep(DESCRIBE_POLL_S)

    def _looks_settled(self, sims: list[Any]) -> bool:
        members = [s.member for s in sims]
        return (
            all(m.rounds > 0 for m in members)
            and len({m.generation for m in members}) == 1
            and members[0].generation > 0
        )

    async def _check(self, group_id: str, sims: list[Any]) -> None:
        assert self.describer is not None
        expected = self.expected(sims[0])
        snapshot = await self.describer.describe(group_id)
        if not snapshot.settled(expected, self.partitions):
            return
        now = time.perf_counter()
        for sim in sims:
            member = sim.member
            # Its answer at the final epoch, or with the partitions it waited for at that
            # epoch, may still be on its way to it: settled once it holds what the server says.
            held = frozenset((t, p) for t, ps in member.owned_ids.items() for p in ps)
            if (
                member.generation == snapshot.epoch
                and held == snapshot.owned_by(member.member_id)
                and member.changed_at >= self.after
            ):
                member.group_size = expected
                self._settle(sim, min(member.changed_at, now))
