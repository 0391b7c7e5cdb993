"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

Pure functions: members (their subscriptions as topic ids, and their current target) and the
topics' partition counts in, a target assignment per member out. The rules are those of
Kafka's UniformAssignor and RangeAssignor:

- uniform, all members subscribed to the same topics: every member gets the same number of
  partitions give or take one, and keeps as many of its current ones as that allows; the
  partitions left over are dealt out in runs, never-assigned ones first in topic and partition
  order.
- uniform, different subscriptions: members keep what they still subscribe to; the remaining
  partitions go topic by topic (most partitions per subscriber first) to the least loaded
  subscriber; then partitions move from the most to the least loaded subscribers of each topic
  until they differ by at most one, or no move helps.
- range: deterministic and not sticky. Members in a fixed order (static members by instance id
  first, then the rest by member id); each topic's partitions in contiguous runs over its
  subscribers, the first `n % k` getting one more.

Every subscribed partition of an existing topic is assigned to exactly one member.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import field

from minicoord.protocol.lean_dataclass import dataclass

Assignment = dict[uuid.UUID, frozenset[int]]

UNIFORM = "uniform"
RANGE = "range"
BALANCE_PASSES = 16


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    subscribed: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


def assign(
    name: str, members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    """The target assignment by the named assignor. Topics missing from `partitions` (not
    existing) are ignored in subscriptions."""
    specs = [
        MemberSpec(
            m.member_id,
            m.instance_id,
            frozenset(t for t in m.subscribed if t in partitions),
            m.current,
        )
        for m in members
    ]
    if name == RANGE:
        return _range(specs, partitions)
    if name == UNIFORM:
        subscriptions = {m.subscribed for m in specs}
        if len(subscriptions) <= 1:
            return _uniform_homogeneous(specs, partitions)
        return _uniform_heterogeneous(specs, partitions)
    raise ValueError(f"unknown assignor {name!r}")


def _topic_order(topics: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    return sorted(topics, key=lambda t: t.int)


def _pack(owned: Mapping[uuid.UUID, list[int]] | Mapping[uuid.UUID, set[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in owned.items() if ps}


def _uniform_homogeneous(
    members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    ordered = sorted(members, key=lambda m: m.member_id)
    if not ordered:
        return {}
    topics = _topic_order(list(ordered[0].subscribed))
    if not topics:
        return {m.member_id: {} for m in ordered}
    held = {(t, p) for m in ordered for t, ps in m.current.items() if t in partitions for p in ps}
    unassigned = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in held]
    subscribed = set(topics)
    total = sum(partitions[t] for t in topics)
    count = len(ordered)
    min_quota, extras = divmod(total, count)
    targets: dict[str, dict[uuid.UUID, list[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for i, member in enumerate(ordered):
        quota = min_quota
        has_extra = False
        if extras > 0:
            quota += 1
            has_extra = True
        kept: dict[uuid.UUID, list[int]] = {}
        for topic in _topic_order(list(member.current)):
            if topic not in subscribed:
                continue
            parts = sorted(p for p in member.current[topic] if p < partitions[topic])
            if len(parts) <= quota:
                kept[topic] = parts
                quota -= len(parts)
            else:
                kept[topic] = parts[:quota]
                unassigned.extend((topic, p) for p in parts[quota:])
                quota = 0
        if quota > 0 and has_extra and count - i > extras:
            # Not filling its extra slot: leave it to a later member that can.
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member.member_id, quota))
        if has_extra:
            extras -= 1
        targets[member.member_id] = kept
    position = 0
    for member_id, quota in unfilled:
        for topic, p in unassigned[position : position + quota]:
            targets[member_id].setdefault(topic, []).append(p)
        position += quota
    return {m: _pack(t) for m, t in targets.items()}


def _uniform_heterogeneous(
    members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    ordered = sorted(members, key=lambda m: m.member_id)
    index = {m.member_id: i for i, m in enumerate(ordered)}
    subscribers: dict[uuid.UUID, list[int]] = {}
    for i, member in enumerate(ordered):
        for topic in member.subscribed:
            subscribers.setdefault(topic, []).append(i)
    owned: list[dict[uuid.UUID, set[int]]] = [{} for _ in ordered]
    owner: dict[tuple[uuid.UUID, int], int] = {}
    for i, member in enumerate(ordered):
        for topic, parts in member.current.items():
            if topic not in member.subscribed:
                continue
            for p in parts:
                if p < partitions[topic] and (topic, p) not in owner:
                    owned[i].setdefault(topic, set()).add(p)
                    owner[(topic, p)] = i
    load = [sum(len(ps) for ps in o.values()) for o in owned]
    topics = sorted(
        subscribers,
        key=lambda t: (-partitions[t] / len(subscribers[t]), len(subscribers[t]), t.int),
    )
    for topic in topics:
        for p in range(partitions[topic]):
            if (topic, p) in owner:
                continue
            target = min(subscribers[topic], key=lambda i: (load[i], i))
            owned[target].setdefault(topic, set()).add(p)
            owner[(topic, p)] = target
            load[target] += 1
    for _ in range(BALANCE_PASSES):
        moved = False
        for topic in topics:
            subs = subscribers[topic]
            if len(subs) < 2:
                continue
            while True:
                donors = [i for i in subs if owned[i].get(topic)]
                if not donors:
                    break
                most = max(donors, key=lambda i: (load[i], -i))
                least = min(subs, key=lambda i: (load[i], i))
                if load[most] - load[least] <= 1:
                    break
                p = max(owned[most][topic])
                owned[most][topic].discard(p)
                owned[least].setdefault(topic, set()).add(p)
                load[most] -= 1
                load[least] += 1
                moved = True
        if not moved:
            break
    return {m.member_id: _pack(owned[index[m.member_id]]) for m in ordered}


def _range(
    members: Sequence[MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    ordered = sorted(
        members,
        key=lambda m: (0, m.instance_id, "") if m.instance_id is not None else (1, "", m.member_id),
    )
    targets: dict[str, dict[uuid.UUID, list[int]]] = {m.member_id: {} for m in ordered}
    topics = {t for m in ordered for t in m.subscribed}
    for topic in _topic_order(list(topics)):
        subs = [m for m in ordered if topic in m.subscribed]
        quota, extra = divmod(partitions[topic], len(subs))
        start = 0
        for i, member in enumerate(subs):
            size = quota + (1 if i < extra else 0)
            if size:
                targets[member.member_id][topic] = list(range(start, start + size))
            start += size
    return {m: _pack(t) for m, t in targets.items()}
