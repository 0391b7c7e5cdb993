"""Records are the source of truth: replaying them rebuilds the live state, before and after
compaction.

Hypothesis drives a coordinator through random commits, group formations, leaves, session
expiries, offset and group deletions and retention expiries, always ending each step with
the groups settled (Stable or Empty: what Kafka itself persists). The records it produced are
then replayed into a fresh coordinator, directly and through an on-disk log that has been
compacted; all three must agree.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record
from minicoord.server.config import Config
from minicoord.server.coordinator.coordinator import GroupCoordinator
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.replay import PartitionReplay
from minicoord.server.coordinator.state import GroupState
from minicoord.storage.cleaner import clean
from minicoord.storage.partition_log import PartitionLog

SESSION = 10_000
GROUPS = ["alpha", "beta", "gamma"]
TOPICS = ["t0", "t1", "t2"]
CONFIG = Config(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10**12)


def subscription(topics: list[str]) -> bytes:
    return bytes(ConsumerProtocolSubscription(topics=topics, user_data=None).encode(version=0))


def assignment(member_index: int) -> bytes:
    assigned = [(TOPICS[member_index % len(TOPICS)], [member_index])]
    return bytes(
        ConsumerProtocolAssignment(assigned_partitions=assigned, user_data=None).encode(version=0)
    )


class Driver:
    """Plays clients against the coordinator, collecting every record it persists."""

    def __init__(self) -> None:
        ids = itertools.count()
        self.coordinator = GroupCoordinator(CONFIG, new_member_id=lambda c: f"{c}-{next(ids)}")
        self.records: list[tuple[int, Record]] = []
        self.now = 1_000
        self.replies: dict[int, Any] = {}
        self._tickets = itertools.count()

    def absorb(self, result: Any) -> Any:
        self.records.extend(result.records)
        for ticket, outcome in result.replies:
            self.replies[ticket] = outcome
        return result.value

    def tick(self, ms: int = 1) -> None:
        self.now += ms
        self.absorb(self.coordinator.advance(self.now))

    def group(self, gid: str) -> Any:
        return self.coordinator.groups.groups.get(gid)

    def rebalance(self, gid: str, add: int, topics: list[str]) -> None:
        """Every current member rejoins and `add` new ones join; then all sync: Stable."""
        group = self.group(gid)
        current = list(group.members) if group else []
        protocols = [("range", subscription(topics))]
        tickets = {}

        def join(member_id: str, client: str) -> int:
            ticket = next(self._tickets)
            self.absorb(
                self.coordinator.join_group(
                    self.now,
                    ticket,
                    group_id=gid,
                    member_id=member_id,
                    group_instance_id=None,
                    client_id=client,
                    client_host="/127.0.0.1",
                    session_timeout_ms=SESSION,
                    rebalance_timeout_ms=SESSION,
                    protocol_type="consumer",
                    protocols=protocols,
                    require_known_member_id=True,
                )
            )
            return ticket

        new_ids = []
        for i in range(add):
            first = join("", f"client{i}")
            outcome = self.replies.pop(first)
            assert outcome.error is ErrorCode.MEMBER_ID_REQUIRED
            new_ids.append(outcome.member_id)
        for mid in current + new_ids:
            tickets[mid] = join(mid, "client")
        joined = {mid: self.replies.pop(t) for mid, t in tickets.items()}
        assert all(o.error is ErrorCode.NONE for o in joined.values()), joined
        leader = next(o for o in joined.values() if o.members)
        generation = leader.generation_id
        members = [m.member_id for m in leader.members]
        assignments = {mid: assignment(i) for i, mid in enumerate(members)}
        syncs = {}
        for mid in members:
            ticket = next(self._tickets)
            syncs[mid] = ticket
            self.absorb(
                self.coordinator.sync_group(
                    self.now,
                    ticket,
                    group_id=gid,
                    generation_id=generation,
                    member_id=mid,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments if mid == leader.member_id else {},
                )
            )
        assert all(self.replies.pop(t).error is ErrorCode.NONE for t in syncs.values())
        assert self.group(gid).state is GroupState.STABLE

    def heartbeat_all(self, except_group: str | None = None) -> None:
        for gid, group in self.coordinator.groups.groups.items():
            if gid == except_group:
                continue
            for mid in group.members:
                self.coordinator.heartbeat(self.now, gid, mid, group.generation_id)

    def settle_after_removal(self, gid: str) -> None:
        group = self.group(gid)
        if group is not None and group.state is GroupState.PREPARING_REBALANCE:
            self.rebalance(gid, 0, TOPICS[:2])


def apply_op(d: Driver, op: tuple[Any, ...]) -> None:
    kind, gid = op[0], op[1]
    group = d.group(gid)
    d.tick()
    if kind == "form":
        topics = TOPICS[: op[3]]
        if group is None or group.state in (GroupState.EMPTY, GroupState.STABLE):
            d.rebalance(gid, op[2], topics)
    elif kind == "leave":
        if group is not None and group.members:
            mid = list(group.members)[op[2] % len(group.members)]
            d.absorb(d.coordinator.leave_group(d.now, gid, [(mid, None)]))
            d.settle_after_removal(gid)
    elif kind == "expire":
        d.now += SESSION + 1
        d.heartbeat_all(except_group=gid)
        d.tick(0)
        d.settle_after_removal(gid)
    elif kind == "commit":
        entry = OffsetCommitEntry(TOPICS[op[2]], op[3] % 3, op[4], -1, f"m{op[4]}")
        # op[5]: an OffsetCommit v2-4 retention time, which the record carries (version 1).
        retention = op[5]
        if group is not None and group.state is GroupState.STABLE:
            mid = next(iter(group.members))
            d.absorb(
                d.coordinator.commit_offsets(
                    d.now, gid, group.generation_id, mid, None, [entry], 2, retention
                )
            )
        else:
            d.absorb(d.coordinator.commit_offsets(d.now, gid, -1, "", None, [entry], 2, retention))
    elif kind == "delete_offsets":
        d.absorb(d.coordinator.delete_offsets(d.now, gid, [(TOPICS[op[2]], op[3] % 3)]))
    elif kind == "delete_group":
        d.absorb(d.coordinator.delete_groups(d.now, [gid]))
    elif kind == "retention":
        d.now += 60_001
        d.heartbeat_all()
        fx_result = d.coordinator.advance(d.now)
        d.absorb(fx_result)
        from minicoord.server.coordinator.results import Effects

        fx = Effects()
        d.coordinator.expire_offsets(fx, d.now)
        d.absorb(fx.result(None))


def snapshot(coordinator: GroupCoordinator) -> dict[str, Any]:
    groups = {}
    for gid, g in coordinator.groups.groups.items():
        protocol = g.protocol_name
        groups[gid] = (
            g.state,
            g.generation_id,
            g.protocol_type,
            protocol,
            g.leader_id,
            sorted(
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol) if protocol else b"",
                    m.assignment,
                )
                for m in g.members.values()
            ),
        )
    offsets = {gid: dict(tps) for gid, tps in coordinator.offsets.offsets.items() if tps}
    return {"groups": groups, "offsets": offsets}


def replayed(partitions: dict[int, list[tuple[bytes, bytes | None]]], now: int) -> dict[str, Any]:
    fresh = GroupCoordinator(CONFIG)
    for partition, records in partitions.items():
        replay = PartitionReplay(partition)
        for key, value in records:
            replay.add(key, value)
        fresh.finish_loading(replay, now)
    return snapshot(fresh)


ops = st.one_of(
    st.tuples(
        st.just("form"),
        st.sampled_from(GROUPS),
        st.integers(1, 3),
        st.integers(1, 3),
    ),
    st.tuples(st.just("leave"), st.sampled_from(GROUPS), st.integers(0, 5)),
    st.tuples(st.just("expire"), st.sampled_from(GROUPS)),
    st.tuples(
        st.just("commit"),
        st.sampled_from(GROUPS),
        st.integers(0, 2),
        st.integers(0, 5),
        st.integers(0, 10**6),
        st.sampled_from([-1, -1, 5_000, 10**9]),
    ),
    st.tuples(
        st.just("delete_offsets"), st.sampled_from(GROUPS), st.integers(0, 2), st.integers(0, 5)
    ),
    st.tuples(st.just("delete_group"), st.sampled_from(GROUPS)),
    st.tuples(st.just("retention"), st.sampled_from(GROUPS)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=30))
def test_replaying_the_log_gives_the_live_state(operations: list[tuple[Any, ...]]) -> None:
    d = Driver()
    for op in operations:
        apply_op(d, op)
    live = snapshot(d.coordinator)

    by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
    for partition, record in d.records:
        by_partition.setdefault(partition, []).append((record.key, record.value))
    assert replayed(by_partition, d.now) == live

    # The same records through an on-disk log with small segments, compacted, then replayed.
    with tempfile.TemporaryDirectory() as tmp:
        compacted: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for partition in by_partition:
            plog = PartitionLog(Path(tmp) / str(partition), str(partition), segment_bytes=1024)
            plog.open()
            for p, record in d.records:
                if p == partition:
                    plog.append([record], timestamp=d.now)
                    plog.commit(plog.write_out())
            plog.roll()
            clean(plog, now_ms=d.now, delete_retention_ms=10**9)
            compacted[partition] = [(r.key, r.value) for r in plog.records()]
            # Compaction keeps one record per key at most.
            assert len(compacted[partition]) == len({k for k, _ in compacted[partition]})
            plog.close()
        assert replayed(compacted, d.now) == live
