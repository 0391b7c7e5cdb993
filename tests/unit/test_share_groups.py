"""Share-group membership (server/coordinator/share/groups.py) with an injected clock: joins,
epochs, fencing, leaving, session expiry and the simple assignor's counts, as Kafka 4.2's
GroupMetadataManager decides them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.share.groups import (
    Assignment,
    ShareGroupError,
    ShareGroups,
    simple_assign,
)
from minicoord.server.coordinator.timers import TimerQueue


@dataclass
class FakeTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    internal: bool = False


class Topics:
    def __init__(self, **counts: int) -> None:
        self.by_name = {n: FakeTopic(n, uuid.uuid4(), c) for n, c in counts.items()}

    def get(self, name: str) -> FakeTopic | None:
        return self.by_name.get(name)


@dataclass
class Answer:
    """A heartbeat's answer or refusal, as the handler turns either into a response."""

    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    epoch: int = 0
    interval_ms: int = 0
    assignment: Assignment | None = None


def groups(topics: Topics, others: frozenset[str] = frozenset(), **config: int) -> ShareGroups:
    return ShareGroups(Config(**config), TimerQueue(), topics, others.__contains__, {}, {})


def beat(sg: ShareGroups, member: str, epoch: int, topics: list[str] | None = None,
         now: int = 0, group: str = "g") -> Answer:  # fmt: skip
    try:
        out = sg.heartbeat(now, group, member, epoch, None, topics, "client", "/127.0.0.1")
    except ShareGroupError as exc:
        return Answer(exc.error, exc.message)
    return Answer(ErrorCode.NONE, None, out.member_id, out.epoch, out.interval_ms, out.assignment)


def owned(outcome) -> list[int]:
    return sorted(p for parts in outcome.assignment.values() for p in parts)


def test_a_member_joins_with_its_own_id_and_gets_every_partition() -> None:
    sg = groups(Topics(t=3))
    out = beat(sg, "m1", 0, ["t"])
    assert (out.error, out.member_id, out.epoch, owned(out)) == (ErrorCode.NONE, "m1", 1, [0, 1, 2])
    assert out.interval_ms == Config().group_share_heartbeat_interval_ms
    # A heartbeat that changes nothing carries no assignment.
    again = beat(sg, "m1", 1)
    assert (again.error, again.epoch, again.assignment) == (ErrorCode.NONE, 1, None)


def test_a_second_member_splits_the_partitions_at_the_next_heartbeats() -> None:
    sg = groups(Topics(t=4))
    beat(sg, "a", 0, ["t"])
    b = beat(sg, "b", 0, ["t"])
    assert b.epoch == 2 and len(owned(b)) == 2
    a = beat(sg, "a", 1)
    assert a.epoch == 2 and sorted(owned(a) + owned(b)) == [0, 1, 2, 3]


def test_epochs_the_coordinator_does_not_know_are_fenced() -> None:
    sg = groups(Topics(t=1))
    beat(sg, "a", 0, ["t"])
    beat(sg, "b", 0, ["t"])
    # a is at epoch 1 and may still use it (its last answer may have been lost), not 3.
    assert beat(sg, "a", 1).error == ErrorCode.NONE
    assert beat(sg, "a", 3).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(sg, "nobody", 2).error == ErrorCode.UNKNOWN_MEMBER_ID
    # Epoch 0 rejoins, as Kafka 4.2 accepts.
    assert beat(sg, "a", 0, ["t"]).error == ErrorCode.NONE


def test_the_first_request_must_subscribe_and_ids_must_be_valid() -> None:
    sg = groups(Topics(t=1))
    assert beat(sg, "a", 0, None).error == ErrorCode.INVALID_REQUEST
    assert beat(sg, "a", 0, []).error == ErrorCode.INVALID_REQUEST
    assert beat(sg, "", 0, ["t"]).error == ErrorCode.INVALID_REQUEST
    assert beat(sg, "x" * 37, 0, ["t"]).error == ErrorCode.INVALID_REQUEST
    assert beat(sg, "a", -2, ["t"]).error == ErrorCode.INVALID_REQUEST
    # A group this node does not know (after a restart, here): the member rejoins.
    assert beat(sg, "a", 1).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert not sg.groups


def test_an_id_held_by_another_kind_of_group_is_not_found() -> None:
    sg = groups(Topics(t=1), others=frozenset({"classic"}))
    out = beat(sg, "a", 0, ["t"], group="classic")
    assert out.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert out.message == "Group classic is not a share group."


def test_leaving_and_expiring_bump_the_epoch_and_free_the_partitions() -> None:
    sg = groups(Topics(t=2), group_share_session_timeout_ms=1000)
    beat(sg, "a", 0, ["t"], now=0)
    beat(sg, "b", 0, ["t"], now=0)
    assert owned(beat(sg, "a", 1, now=0)) == [0]
    left = beat(sg, "b", -1)
    assert (left.error, left.epoch) == (ErrorCode.NONE, -1)
    assert beat(sg, "b", -1).error == ErrorCode.UNKNOWN_MEMBER_ID
    a = beat(sg, "a", 2, now=500)
    assert (a.epoch, owned(a)) == (3, [0, 1])
    # No heartbeat for a session timeout: removed.
    for callback in sg.timers.pop_due(1499):
        callback(1499)
    assert "a" in sg.groups["g"].members
    for callback in sg.timers.pop_due(1500):
        callback(1500)
    assert not sg.groups["g"].members and sg.groups["g"].state == "Empty"
    assert sg.delete("g") == ErrorCode.NONE and "g" not in sg.groups


def test_a_full_group_refuses_a_new_member() -> None:
    sg = groups(Topics(t=1), group_share_max_size=1)
    beat(sg, "a", 0, ["t"])
    assert beat(sg, "b", 0, ["t"]).error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_new_partitions_reach_the_members() -> None:
    topics = Topics(t=1)
    sg = groups(topics)
    beat(sg, "a", 0, ["t"])
    topics.by_name["t"].partitions = 3
    sg.on_topics_changed()
    out = beat(sg, "a", 1)
    assert (out.epoch, owned(out)) == (2, [0, 1, 2])


def test_the_simple_assignors_counts() -> None:
    # No more members than partitions: each partition once, counts differing by one at most.
    assert simple_assign(2, list(range(5))) == [[0, 1, 2], [3, 4]]
    assert simple_assign(3, list(range(3))) == [[0], [1], [2]]
    # More members: each partition shared by ceil(M/P) of them, no member given one twice.
    shared = simple_assign(5, [0, 1])
    assert all(len(set(parts)) == len(parts) for parts in shared)
    assert sorted(p for parts in shared for p in parts) == [0, 0, 0, 1, 1, 1]
    assert simple_assign(2, []) == [[], []]
