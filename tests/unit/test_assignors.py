"""The server-side assignors' properties, for any group: every subscribed partition assigned
exactly once, balance within one for identical subscriptions, and (uniform) minimal movement
when a member joins or leaves."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from minicoord.server.coordinator.assignors import RANGE, UNIFORM, MemberSpec, assign

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


def exactly_once(result, members, partitions) -> None:  # type: ignore[no-untyped-def]
    seen = {}
    for member_id, assignment in result.items():
        for topic, parts in assignment.items():
            for p in parts:
                assert (topic, p) not in seen, f"{topic}-{p} assigned twice"
                seen[(topic, p)] = member_id
    wanted = {
        (t, p)
        for m in members
        for t in m.subscribed
        if t in partitions
        for p in range(partitions[t])
    }
    assert set(seen) == wanted
    for m in members:  # only what the member subscribes to
        assert set(result[m.member_id]) <= m.subscribed


def counts(result) -> list[int]:  # type: ignore[no-untyped-def]
    return [sum(len(p) for p in a.values()) for a in result.values()]


partition_counts = st.fixed_dictionaries({t: st.integers(1, 12) for t in TOPICS})
member_ids = st.lists(
    st.text("abcdefghij", min_size=1, max_size=6), min_size=1, max_size=8, unique=True
)


@settings(max_examples=200)
@given(member_ids, partition_counts, st.sampled_from([UNIFORM, RANGE]), st.integers(1, 4))
def test_homogeneous_groups_are_covered_and_balanced(ids, partitions, name, n_topics) -> None:  # type: ignore[no-untyped-def]
    topics = frozenset(TOPICS[:n_topics])
    members = [MemberSpec(i, None, topics) for i in ids]
    result = assign(name, members, partitions)
    exactly_once(result, members, partitions)
    if name == UNIFORM:
        assert max(counts(result)) - min(counts(result)) <= 1
    else:  # range balances each topic
        for t in topics:
            sizes = [len(result[m].get(t, ())) for m in ids]
            assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.text("abcdefgh", min_size=1, max_size=5),
            st.sets(st.sampled_from(TOPICS), min_size=1),
        ),
        min_size=1,
        max_size=8,
        unique_by=lambda x: x[0],
    ),
    partition_counts,
    st.sampled_from([UNIFORM, RANGE]),
)
def test_different_subscriptions_are_covered(members_spec, partitions, name) -> None:  # type: ignore[no-untyped-def]
    members = [MemberSpec(i, None, frozenset(ts)) for i, ts in members_spec]
    exactly_once(assign(name, members, partitions), members, partitions)


@settings(max_examples=150)
@given(member_ids, partition_counts, st.integers(1, 4), st.text("xyz", min_size=1, max_size=3))
def test_uniform_moves_little_when_a_member_joins_or_leaves(
    ids, partitions, n_topics, new_id
) -> None:  # type: ignore[no-untyped-def]
    topics = frozenset(TOPICS[:n_topics])
    members = [MemberSpec(i, None, topics) for i in ids]
    before = assign(UNIFORM, members, partitions)
    total = sum(partitions[t] for t in topics)
    # Join: the newcomer takes its share; nobody else gains, and only what it takes moves.
    if new_id not in ids:
        current = [MemberSpec(m.member_id, None, topics, before[m.member_id]) for m in members]
        after = assign(UNIFORM, [*current, MemberSpec(new_id, None, topics)], partitions)
        exactly_once(after, [*current, MemberSpec(new_id, None, topics)], partitions)
        for m in ids:
            for t, parts in after[m].items():
                assert parts <= before[m].get(t, frozenset()), "an old member gained on a join"
        assert sum(counts({new_id: after[new_id]})) <= total // (len(ids) + 1) + 1
    # Leave: only the leaver's partitions move.
    if len(ids) > 1:
        rest = ids[1:]  # the first member leaves
        current = [MemberSpec(m, None, topics, before[m]) for m in rest]
        after = assign(UNIFORM, current, partitions)
        exactly_once(after, current, partitions)
        kept = sum(
            len(before[m].get(t, frozenset()) & after[m].get(t, frozenset()))
            for m in rest
            for t in topics
        )
        # Everyone keeps all they had, except members over the new quota shedding extras.
        assert kept >= sum(counts({m: before[m] for m in rest})) - len(rest)


def test_uniform_keeps_a_balanced_assignment_as_it_is() -> None:
    topics = frozenset(TOPICS[:1])
    current = {
        "a": {TOPICS[0]: frozenset({0, 5, 6})},
        "b": {TOPICS[0]: frozenset({1, 2, 3})},
        "c": {TOPICS[0]: frozenset({4, 7})},
    }
    members = [MemberSpec(m, None, topics, a) for m, a in current.items()]
    assert assign(UNIFORM, members, {TOPICS[0]: 8}) == current


def test_range_orders_static_members_first_and_gives_runs() -> None:
    topics = frozenset(TOPICS[:2])
    members = [
        MemberSpec("m-2", None, topics),
        MemberSpec("m-1", "zeta", topics),
        MemberSpec("m-3", "alpha", topics),
    ]
    result = assign(RANGE, members, {TOPICS[0]: 7, TOPICS[1]: 7})
    assert result["m-3"] == {TOPICS[0]: frozenset({0, 1, 2}), TOPICS[1]: frozenset({0, 1, 2})}
    assert result["m-1"][TOPICS[0]] == frozenset({3, 4})
    assert result["m-2"][TOPICS[0]] == frozenset({5, 6})


def test_topics_that_do_not_exist_are_ignored() -> None:
    ghost = uuid.UUID(int=99)
    members = [MemberSpec("a", None, frozenset({TOPICS[0], ghost}))]
    assert assign(UNIFORM, members, {TOPICS[0]: 2}) == {"a": {TOPICS[0]: frozenset({0, 1})}}
