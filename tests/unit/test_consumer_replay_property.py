"""KIP-848 groups are their records: at any moment, replaying what the coordinator wrote
rebuilds every consumer group exactly (epochs, members, their reconciliation state and
assignments, targets, offsets), directly and through an on-disk log that was compacted.

Unlike classic groups, which persist only Stable and Empty, a consumer group writes every
change (Kafka's ConsumerGroup*Record family), so the comparison holds mid-reconciliation too.
Hypothesis drives members joining, heartbeating with what they own, changing subscriptions,
leaving (dynamic and static), expiring, committing, and topics growing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from consumer_helpers import Harness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record
from minicoord.server.config import Config
from minicoord.server.coordinator.consumer.group import ConsumerGroup
from minicoord.server.coordinator.consumer.requests import new_member_id
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.replay import PartitionReplay
from minicoord.storage.cleaner import clean
from minicoord.storage.partition_log import PartitionLog

GROUPS = ["alpha", "beta"]
TOPICS = ["t0", "t1", "t2"]
REGEXES = ["t[01]", "t.*", "nothing.*"]
SESSION = 10_000


class Driver(Harness):
    """Members that follow the coordinator: each adopts the assignment it is sent."""

    def __init__(self, assignment_interval_ms: int = 0) -> None:
        config = Config(
            group_consumer_heartbeat_interval_ms=500,
            group_consumer_session_timeout_ms=SESSION,
            group_min_session_timeout_ms=1000,
            group_consumer_assignment_interval_ms=assignment_interval_ms,
        )
        super().__init__(config, **{t: 3 for t in TOPICS})
        # (group, member) -> (epoch, owned, instance id)
        self.members: dict[tuple[str, str], tuple[int, dict[str, list[int]], str | None]] = {}
        self.counter = 0

    def beat(self, gid: str, mid: str, **changes: Any) -> None:
        epoch, owned, instance = self.members[(gid, mid)]
        out = self.hb(mid, epoch, owned=owned, instance=instance, group=gid, **changes)
        if out.error is ErrorCode.NONE:
            new_owned = self.owned(out) if out.assignment is not None else owned
            self.members[(gid, mid)] = (out.member_epoch, new_owned, instance)
        else:
            # Fenced (expired while away, or a stale epoch): the member drops out, as a
            # client that rejoins under epoch 0 would after losing its partitions.
            del self.members[(gid, mid)]

    def live(self, gid: str) -> list[str]:
        return sorted(m for g, m in self.members if g == gid)


def apply_op(d: Driver, op: tuple[Any, ...]) -> None:
    kind, gid = op[0], op[1]
    d.tick(1)
    members = d.live(gid)
    if kind == "join":
        d.counter += 1
        instance = f"i{d.counter}" if op[3] else None
        # v1 clients name themselves (KIP-1082).
        out = d.hb(new_member_id(), 0, topics=TOPICS[: op[2]], instance=instance, group=gid)
        assert out.error is ErrorCode.NONE, out
        assert out.member_id is not None
        d.members[(gid, out.member_id)] = (
            out.member_epoch,
            d.owned(out) if out.assignment is not None else {},
            instance,
        )
    elif kind == "beat":
        for _ in range(op[2]):
            for mid in d.live(gid):
                d.beat(gid, mid)
    elif kind == "subscribe" and members:
        d.beat(gid, members[op[2] % len(members)], topics=TOPICS[: op[3]])
    elif kind == "regex" and members:
        d.beat(gid, members[op[2] % len(members)], regex=op[3])
    elif kind == "leave" and members:
        mid = members[op[2] % len(members)]
        _, _, instance = d.members.pop((gid, mid))
        epoch = -2 if instance is not None else -1
        out = d.hb(mid, epoch, instance=instance, group=gid)
        assert out.error is ErrorCode.NONE, out
    elif kind == "expire":
        # Every other group keeps heartbeating while this one's members fall silent.
        for step in range(2):
            d.now += SESSION // 2 + 1
            for g, m in list(d.members):
                if g != gid:
                    d.beat(g, m)
            d.tick(0)
            del step
        for key in [k for k in d.members if k[0] == gid]:
            del d.members[key]
    elif kind == "commit":
        entry = OffsetCommitEntry(TOPICS[op[2]], op[3] % 3, op[4], -1, "meta")
        if members:
            mid = members[0]
            epoch = d.members[(gid, mid)][0]
            result = d.coordinator.commit_offsets(d.now, gid, epoch, mid, None, [entry], version=9)
        else:
            result = d.coordinator.commit_offsets(d.now, gid, -1, "", None, [entry])
        d.absorb(result)
    elif kind == "grow":
        topic = TOPICS[op[2]]
        current = d.registry.get(topic)
        assert current is not None
        if current.partitions < 6:
            d.registry.add_partitions(current, current.partitions + 1)
            d.coordinator.on_topics_changed({topic}, created=False)
    elif kind == "delete_group" and not members:
        d.absorb(d.coordinator.delete_groups(d.now, [gid]))


def snapshot(coordinator: GroupCoordinator) -> dict[str, Any]:
    groups = {}
    for gid, g in coordinator.groups.groups.items():
        if not isinstance(g, ConsumerGroup):
            # A commit outside any group makes a classic (simple) group, as in Kafka.
            groups[gid] = ("classic", g.state, g.generation_id, sorted(g.members))
            continue
        groups[gid] = (
            g.epoch,
            g.assignment_epoch,
            g.assignment_timestamp,
            g.state,
            sorted(g.static_members.items()),
            sorted(g.owners.items()),
            {m: dict(a) for m, a in g.target.items()},
            sorted(
                (
                    m.member_id,
                    m.subscription(),
                    m.epoch,
                    m.previous_epoch,
                    m.state,
                    dict(m.assigned),
                    dict(m.pending),
                )
                for m in g.members.values()
            ),
            {r: (sorted(v.topics), v.version, v.timestamp) for r, v in g.regexes.items()},
        )
    offsets = {gid: dict(tps) for gid, tps in coordinator.offsets.offsets.items() if tps}
    return {"groups": groups, "offsets": offsets}


def replayed(d: Driver, partitions: dict[int, list[tuple[bytes, bytes | None]]]) -> dict[str, Any]:
    fresh = GroupCoordinator(d.config, topics=d.registry)
    for partition, records in partitions.items():
        replay = PartitionReplay(partition)
        for key, value in records:
            replay.add(key, value)
        fresh.finish_loading(replay, d.now)
    return snapshot(fresh)


ops = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(GROUPS), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("beat"), st.sampled_from(GROUPS), st.integers(1, 3)),
    st.tuples(st.just("subscribe"), st.sampled_from(GROUPS), st.integers(0, 5), st.integers(1, 3)),
    st.tuples(
        st.just("regex"), st.sampled_from(GROUPS), st.integers(0, 5), st.sampled_from(REGEXES)
    ),
    st.tuples(st.just("leave"), st.sampled_from(GROUPS), st.integers(0, 5)),
    st.tuples(st.just("expire"), st.sampled_from(GROUPS)),
    st.tuples(
        st.just("commit"),
        st.sampled_from(GROUPS),
        st.integers(0, 2),
        st.integers(0, 5),
        st.integers(0, 10**6),
    ),
    st.tuples(st.just("grow"), st.sampled_from(GROUPS), st.integers(0, 2)),
    st.tuples(st.just("delete_group"), st.sampled_from(GROUPS)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=30), st.sampled_from([0, 5]))
def test_replaying_a_consumer_groups_records_gives_the_live_group(
    operations: list[tuple[Any, ...]], assignment_interval_ms: int
) -> None:
    # With an interval, targets computed later (batched, by the timer) must replay too.
    d = Driver(assignment_interval_ms)
    by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
    seen = 0
    for op in operations:
        apply_op(d, op)
        for partition, record in d.records[seen:]:
            by_partition.setdefault(partition, []).append((record.key, record.value))
        seen = len(d.records)
        # Mid-reconciliation as much as settled: every step must replay to the live state.
        assert replayed(d, by_partition) == snapshot(d.coordinator), op
    live = snapshot(d.coordinator)

    with tempfile.TemporaryDirectory() as tmp:
        compacted: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for partition, records in by_partition.items():
            plog = PartitionLog(Path(tmp) / str(partition), str(partition), segment_bytes=1024)
            plog.open()
            for key, value in records:
                plog.append([Record(key, value)], timestamp=d.now)
                plog.commit(plog.write_out())
            plog.roll()
            clean(plog, now_ms=d.now, delete_retention_ms=10**9)
            compacted[partition] = [(r.key, r.value) for r in plog.records()]
            plog.close()
        assert replayed(d, compacted) == live
