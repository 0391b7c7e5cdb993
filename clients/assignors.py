"""The leader's side of the classic consumer protocol: Kafka's range and round-robin assignors.

Pure functions over member subscriptions and partition counts, written from the behaviour of
Kafka's RangeAssignor and RoundRobinAssignor (members ordered by member id, partitions in
topic then partition order), so a simulated leader hands out what a Java consumer would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# member id -> topic -> partitions
Assignment = dict[str, dict[str, list[int]]]

ASSIGNORS = ("range", "roundrobin")


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> Assignment:
    """Per topic, consecutive partition ranges; the first `n % m` members get one more."""
    result: Assignment = {member: {} for member in subscriptions}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    for topic in topics:
        count = partitions.get(topic, 0)
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        if not members or count <= 0:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            length = share + (1 if i < extra else 0)
            if length:
                result[member][topic] = list(range(start, start + length))
            start += length
    return result


def roundrobin_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> Assignment:
    """All topic-partitions in order, dealt one at a time to the next member subscribed."""
    result: Assignment = {member: {} for member in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return result
    subscribed = {m: set(subscriptions[m]) for m in members}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    turn = 0
    for topic in topics:
        for partition in range(partitions.get(topic, 0)):
            # Skip members not subscribed to this topic, as Kafka's circular iterator does.
            for _ in range(len(members)):
                member = members[turn % len(members)]
                turn += 1
                if topic in subscribed[member]:
                    result[member].setdefault(topic, []).append(partition)
                    break
    return result


def assign(
    assignor: str, subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> Assignment:
    if assignor == "range":
        return range_assign(subscriptions, partitions)
    if assignor == "roundrobin":
        return roundrobin_assign(subscriptions, partitions)
    raise ValueError(f"unknown assignor {assignor!r}; expected one of {ASSIGNORS}")
