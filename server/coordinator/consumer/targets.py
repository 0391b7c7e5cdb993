"""What a consumer group's members subscribe to, what the assignor makes of it, and the records
that persist a group's state (Kafka's record builders for KIP-848 groups).

Kept apart from the heartbeat rules so that the manager, the mixed-group paths and the replay
property test build records one way.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, TypeAlias

from minicoord.protocol import consumer_records as cr
from minicoord.protocol.records import Record
from minicoord.server.coordinator import assignors
from minicoord.server.coordinator.consumer.group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    ResolvedRegex,
)
from minicoord.server.coordinator.results import Effects

if TYPE_CHECKING:
    import re2

# Whether the member whose heartbeat resolves a regex may describe a topic (with an
# authorizer); None: every topic.
Describable: TypeAlias = Callable[[str], bool] | None


class TopicLike(Protocol):
    name: str
    topic_id: uuid.UUID
    partitions: int
    internal: bool


class TopicsView(Protocol):
    """The topics a coordinator sees (the broker's TopicRegistry)."""

    def get(self, name: str) -> TopicLike | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicLike | None: ...

    def all(self) -> list[TopicLike]: ...


class InvalidRegex(ValueError):
    pass


# RE2 is imported with the first regex subscription, not at every server's start.
@functools.cache
def _quiet() -> re2.Options:
    import re2

    options = re2.Options()
    options.log_errors = False  # the reason goes to the client, not to stderr
    return options


def compile_regex(pattern: str) -> re2._Regexp:  # type: ignore[name-defined]
    """RE2 syntax, as Kafka's RE2/J accepts; InvalidRegex with RE2's reason otherwise."""
    import re2

    try:
        return re2.compile(pattern, _quiet())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise InvalidRegex(str(reason)) from None


def resolve_regex(
    pattern: str, topics: TopicsView, now: int, describable: Describable = None
) -> ResolvedRegex:
    """The existing topics a subscription regex matches in full (Kafka's `matches()`), less
    those the resolving member may not describe (Kafka's filterTopicDescribeAuthorizedTopics):
    a member cannot consume a topic it cannot describe, and would hold its partitions
    without ever giving them up."""
    regex = compile_regex(pattern)
    names = frozenset(
        t.name
        for t in topics.all()
        if regex.fullmatch(t.name) is not None and (describable is None or describable(t.name))
    )
    return ResolvedRegex(names, 0, now)


def topic_ids(names: Iterable[str], topics: TopicsView) -> frozenset[uuid.UUID]:
    ids = []
    for name in names:
        topic = topics.get(name)
        if topic is not None:
            ids.append(topic.topic_id)
    return frozenset(ids)


def metadata_hash(names: Iterable[str], topics: TopicsView) -> int:
    """A hash of the existing subscribed topics' ids, names and partition counts: a change
    (a topic created, deleted or grown) bumps the group epoch. Only ever compared with
    itself, like Kafka's (KIP-1101), so any stable function serves."""
    found = sorted((t.name, t.topic_id.bytes, t.partitions) for n in names if (t := topics.get(n)))
    if not found:
        return 0
    # Imported here: hashlib loads OpenSSL's libcrypto, half a megabyte of a server's memory
    # that only consumer groups need.
    import hashlib

    digest = hashlib.blake2b(digest_size=8)
    for name, tid, partitions in found:
        digest.update(name.encode() + b"\0" + tid + struct.pack(">i", partitions))
    return struct.unpack(">q", digest.digest())[0]


def preferred_assignor(group: ConsumerGroup, default: str) -> str:
    """The server assignor most members asked for; the configured default when none did."""
    votes: dict[str, int] = {}
    for member in group.members.values():
        if member.server_assignor is not None:
            votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
    if not votes:
        return default
    return max(sorted(votes), key=lambda name: votes[name])


def compute_targets(
    group: ConsumerGroup, topics: TopicsView, assignor: str
) -> dict[str, Assignment]:
    """Every member's target for the group's current epoch."""
    specs = []
    partitions: dict[uuid.UUID, int] = {}
    for member in group.members.values():
        ids = topic_ids(group.member_topics(member), topics)
        for name in group.member_topics(member):
            topic = topics.get(name)
            if topic is not None:
                partitions[topic.topic_id] = topic.partitions
        specs.append(
            assignors.MemberSpec(
                member.member_id, member.instance_id, ids, group.target.get(member.member_id, {})
            )
        )
    return assignors.assign(assignor, specs, partitions)


# -- records --------------------------------------------------------------------------------


def write_member(fx: Effects, group: ConsumerGroup, member: ConsumerMember) -> None:
    classic = member.classic
    fx.persist(
        group.partition,
        Record(
            cr.member_key(group.group_id, member.member_id),
            cr.member_value(
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                client_id=member.client_id,
                client_host=member.client_host,
                topics=member.topics,
                regex=member.regex,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                server_assignor=member.server_assignor,
                classic=None
                if classic is None
                else (classic.session_timeout_ms, classic.protocols),
            ),
        ),
    )


def write_epoch(fx: Effects, group: ConsumerGroup) -> None:
    fx.persist(
        group.partition,
        Record(
            cr.group_epoch_key(group.group_id),
            cr.group_epoch_value(group.epoch, group.metadata_hash),
        ),
    )


def write_target(fx: Effects, group: ConsumerGroup, member_id: str) -> None:
    fx.persist(
        group.partition,
        Record(
            cr.target_key(group.group_id, member_id),
            cr.target_value(group.target.get(member_id, {})),
        ),
    )


def write_target_epoch(fx: Effects, group: ConsumerGroup, timestamp: int) -> None:
    fx.persist(
        group.partition,
        Record(
            cr.target_epoch_key(group.group_id),
            cr.target_epoch_value(group.assignment_epoch, timestamp),
        ),
    )


def write_current(fx: Effects, group: ConsumerGroup, member: ConsumerMember) -> None:
    fx.persist(
        group.partition,
        Record(
            cr.current_key(group.group_id, member.member_id),
            cr.current_value(
                member.epoch, member.previous_epoch, member.state, member.assigned, member.pending
            ),
        ),
    )


def write_regex(fx: Effects, group: ConsumerGroup, regex: str) -> None:
    resolved = group.regexes.get(regex)
    value = (
        None
        if resolved is None
        else cr.regex_value(resolved.topics, resolved.version, resolved.timestamp)
    )
    fx.persist(group.partition, Record(cr.regex_key(group.group_id, regex), value))


def write_member_tombstones(fx: Effects, group: ConsumerGroup, member_id: str) -> None:
    """A removed member, in the order Kafka's replay expects: current assignment, target,
    metadata."""
    gid = group.group_id
    fx.persist(group.partition, Record(cr.current_key(gid, member_id), None))
    fx.persist(group.partition, Record(cr.target_key(gid, member_id), None))
    fx.persist(group.partition, Record(cr.member_key(gid, member_id), None))


def write_group_tombstones(fx: Effects, group: ConsumerGroup) -> None:
    """Everything of a group that goes (deletion, conversion to a classic group), in Kafka's
    order: current assignments, targets, target epoch, members, regexes, epoch."""
    gid = group.group_id
    part = group.partition
    for member_id in group.members:
        fx.persist(part, Record(cr.current_key(gid, member_id), None))
    for member_id in group.members:
        fx.persist(part, Record(cr.target_key(gid, member_id), None))
    fx.persist(part, Record(cr.target_epoch_key(gid), None))
    for member_id in group.members:
        fx.persist(part, Record(cr.member_key(gid, member_id), None))
    for regex in group.regexes:
        fx.persist(part, Record(cr.regex_key(gid, regex), None))
    if group.legacy_partition_metadata:
        fx.persist(part, Record(cr.partition_metadata_key(gid), None))
    fx.persist(part, Record(cr.group_epoch_key(gid), None))
