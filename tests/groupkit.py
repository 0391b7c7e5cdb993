"""What the coordinator says about consumer groups of either protocol, shared by tests/clients
and tests/matrix: its one-line record of each finished rebalance and of each epoch bump of a
KIP-848 group, its own ConsumerGroupDescribe answer (the member epochs no stock admin client
shows), and what its server-side assignors must produce.

It lives at the top of tests/ (on sys.path through tests/conftest.py), like deliverykit;
test helpers are imported by their bare module name, so its name must be unique in tests/.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.consumer_group_apis import ConsumerGroupDescribeRequest

# One line per finished rebalance, of either protocol (server/coordinator/results.py).
_REBALANCE = re.compile(
    r"rebalance group=(\S+) generation=(\d+) state=(\S+) members=(\d+) duration_ms=\d+ "
    r"reason=(\".*\") protocol=(\S+)$",
    re.MULTILINE,
)
_EPOCH = re.compile(r"group (\S+): epoch (\d+): (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Rebalance:
    epoch: int
    state: str
    members: int
    reason: str
    protocol: str


def rebalances(log: str, group: str) -> list[Rebalance]:
    """The group's finished rebalances: the state it reached, at which epoch or generation."""
    return [
        Rebalance(int(m[2]), m[3], int(m[4]), json.loads(m[5]), m[6])
        for m in _REBALANCE.finditer(log)
        if m[1] == group
    ]


def epoch_bumps(log: str, group: str) -> list[tuple[int, str]]:
    """(group epoch, reason) of every epoch bump of a consumer group."""
    return [(int(m[2]), m[3]) for m in _EPOCH.finditer(log) if m[1] == group]


def settled_with(group: str, members: int, protocol: str = "consumer") -> Callable[[str], bool]:
    """A log predicate: the group's latest finished rebalance left it Stable with `members`
    members, run by `protocol` ("consumer" for a KIP-848 group, mixed or not)."""

    def check(log: str) -> bool:
        done = rebalances(log, group)
        return bool(done) and (done[-1].state, done[-1].members, done[-1].protocol) == (
            "Stable",
            members,
            protocol,
        )

    return check


def describe_consumer_group(bootstrap: str, group: str, timeout: float = 10) -> Any:
    """ConsumerGroupDescribe v1 answered by the coordinator, read with minicoord's own client:
    the group epoch and each member's epoch, which no stock admin client shows. From a
    synchronous test only (it runs an event loop of its own)."""
    host, port = bootstrap.rsplit(":", 1)

    async def ask() -> Any:
        client = await ProtocolClient.connect(host, int(port), "clientkit-describe")
        try:
            request = ConsumerGroupDescribeRequest(
                version=1, group_ids=[group], include_authorized_operations=False
            )
            response = await asyncio.wait_for(client.request(request, 1), timeout)
        finally:
            await client.close()
        (described,) = response.groups
        return described

    return asyncio.run(ask())


def range_assignment(
    member_ids: Iterable[str], topics: Mapping[str, int]
) -> dict[str, frozenset[tuple[str, int]]]:
    """Kafka's server-side RangeAssignor for dynamic members who all subscribe to `topics`
    (topic -> partition count): members in member-id order (Java's String order, which is
    code-point order for these ASCII ids); per topic, the first n % M members get n // M + 1
    consecutive partitions from 0 up, the others n // M."""
    ids = sorted(member_ids)
    out: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    for topic, count in topics.items():
        per, extra = divmod(count, len(ids))
        start = 0
        for i, member in enumerate(ids):
            size = per + (1 if i < extra else 0)
            out[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in out.items()}


def member_epochs(described: Any) -> dict[str, int]:
    return {m.member_id: m.member_epoch for m in described.members}
