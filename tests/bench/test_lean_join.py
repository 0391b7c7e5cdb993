"""`minicoord bench lean --api join`: the hand-packed frames equal kafka-python's generated
encodings, the answers it reads are read right, and a small group settles on a real server
over 127.0.0.1 (against a second minicoord standing in for the peer). No figure is asserted."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from minicoord.bench import lean_join as lj
from minicoord.bench.cli import main as bench_main
from minicoord.server.process import ServerProcess


def test_requests_are_kafka_pythons_encodings() -> None:
    metadata = lj.subscription(b"bench")
    join = JoinGroupRequest(
        group_id="g", session_timeout_ms=lj.SESSION_TIMEOUT_MS,
        rebalance_timeout_ms=lj.REBALANCE_TIMEOUT_MS, member_id="m-1", group_instance_id=None,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )  # fmt: skip
    assert lj.join_body(b"g", b"m-1", metadata) == bytes(join.encode(version=lj.JOIN_VERSION))
    a = SyncGroupRequest.SyncGroupRequestAssignment
    sync = SyncGroupRequest(
        group_id="g", generation_id=3, member_id="m-1", group_instance_id=None,
        assignments=[a(member_id="m-1", assignment=b"xy"), a(member_id="m-2", assignment=b"")],
    )  # fmt: skip
    body = lj.sync_body(b"g", 3, b"m-1", [(b"m-1", b"xy"), (b"m-2", b"")])
    assert body == bytes(sync.encode(version=lj.SYNC_VERSION))
    beat = HeartbeatRequest(group_id="g", generation_id=3, member_id="m-1", group_instance_id=None)
    assert lj.heartbeat_body(b"g", 3, b"m-1") == bytes(beat.encode(version=lj.HEARTBEAT_VERSION))
    m = LeaveGroupRequest.MemberIdentity
    leave = LeaveGroupRequest(
        group_id="g", members=[m(member_id="a", group_instance_id=None),
                               m(member_id="b", group_instance_id=None)],
    )  # fmt: skip
    assert lj.leave_body(b"g", [b"a", b"b"]) == bytes(leave.encode(version=lj.LEAVE_VERSION))


def test_subscription_and_assignment_are_the_consumer_protocols() -> None:
    sub = ConsumerProtocolSubscription.decode(lj.subscription(b"bench"))
    assert list(sub.topics) == ["bench"] and sub.user_data is None
    data = lj.assignment(b"bench", [1, 5, 9], 250)
    decoded = ConsumerProtocolAssignment.decode(data)
    ((topic, partitions),) = [(t.topic, list(t.partitions)) for t in decoded.assigned_partitions]
    assert (topic, partitions) == ("bench", [1, 5, 9])
    assert lj.assigned_group_size(data) == 250
    assert lj.assigned_group_size(lj.assignment(b"bench", [], 7)) == 7


def test_plan_gives_every_partition_once_and_every_member_the_size() -> None:
    members = [b"m-3", b"m-1", b"m-2"]
    plan = lj.plan(b"bench", 8, members)
    assert [m for m, _ in plan] == sorted(members)
    owned = [list(ConsumerProtocolAssignment.decode(a).assigned_partitions[0].partitions)
             for _, a in plan]  # fmt: skip
    assert sorted(p for ps in owned for p in ps) == list(range(8))
    assert all(lj.assigned_group_size(a) == 3 for _, a in plan)


@pytest.mark.parametrize("leader", [True, False])
def test_join_answers_are_read_as_kafka_python_writes_them(leader: bool) -> None:
    member = JoinGroupResponse.JoinGroupResponseMember
    listed = [
        member(member_id=f"m-{i}", group_instance_id=None, metadata=b"meta") for i in range(3)
    ]
    answer = JoinGroupResponse(
        throttle_time_ms=0, error_code=0, generation_id=9, protocol_name="range",
        leader="m-0", member_id="m-0" if leader else "m-2", members=listed if leader else [],
    )  # fmt: skip
    joined = lj.parse_join(bytes(answer.encode(version=lj.JOIN_VERSION)))
    assert (joined.error, joined.generation, joined.leader) == (0, 9, b"m-0")
    assert joined.member_id == (b"m-0" if leader else b"m-2")
    assert joined.members == ([b"m-0", b"m-1", b"m-2"] if leader else [])
    refused = JoinGroupResponse(
        throttle_time_ms=0, error_code=79, generation_id=-1, protocol_name="", leader="",
        member_id="given", members=[],
    )  # fmt: skip
    first = lj.parse_join(bytes(refused.encode(version=lj.JOIN_VERSION)))
    assert (first.error, first.member_id) == (lj.MEMBER_ID_REQUIRED, b"given")


def test_lean_join_settles_a_group_on_both_targets(
    capsys: pytest.CaptureFixture[str], server_factory: Callable[..., ServerProcess]
) -> None:
    peer = server_factory(topics=[("bench", 64)])
    args = ["lean", "--api", "join", "--join-size", "40", "--procs", "2", "--rounds", "2"]
    args += ["--compare-bootstrap", f"127.0.0.1:{peer.port}"]
    args += ["--compare-pid", str(peer.proc.pid)]
    assert bench_main(args) == 0
    out = capsys.readouterr().out
    assert "did not settle" not in out, out
    rounds = re.findall(
        r"round \d (\S+)\s+([\d,.]+) ms\s+client CPU per process \[([\d., ]+)\]\s+server", out
    )
    assert sorted(name for name, _, _ in rounds) == ["minicoord", "minicoord", "peer", "peer"]
    assert all(float(ms.replace(",", "")) > 0 for _, ms, _ in rounds)
    assert all(len(cpu.split(",")) == 2 for _, _, cpu in rounds)
    # Every member joined twice at least: once to be given its id (KIP-394), once with it.
    per_member = [float(x) for x in re.findall(r"JoinGroups per member ([\d.]+)", out)]
    assert len(per_member) == 4 and min(per_member) >= 2.0
    assert re.search(r"minicoord / peer \(share of its time\): median [\d.]+ \(rounds", out)
