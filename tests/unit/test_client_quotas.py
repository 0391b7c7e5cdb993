"""Client quotas (server/client_quotas.py), sans-IO: Kafka's rules for what an entity may be and
what each takes, the records a change writes, and DescribeClientQuotas' filters."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from minicoord.protocol import metadata_records as mr
from minicoord.protocol.errors import ErrorCode
from minicoord.server.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    DescribeError,
    QuotaStore,
    alter,
    describe,
)

Entry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData


def entry(entity: list[tuple[str, str | None]], *ops: tuple[str, float | None]) -> Any:
    return Entry(
        entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[Entry.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops],
    )


def set_quotas(store: QuotaStore, *entries: Any) -> list[tuple[ErrorCode, str | None]]:
    reread = QuotaStore()
    reread.entities = {entity: dict(values) for entity, values in store.entities.items()}
    outcomes, records = alter(store, entries)
    for record in records:
        reread.apply(mr.decode(record))
    # What was written, replayed on what was there, is what the store now holds.
    assert reread.entities == store.entities
    return [(o.error, o.message) for o in outcomes]


def test_set_change_and_remove_write_a_record_per_key_that_moves() -> None:
    store = QuotaStore()
    alice = [("user", "alice")]
    _, records = alter(store, [entry(alice, ("producer_byte_rate", 1024.0))])
    assert len(records) == 1
    # The same value again writes nothing; a new one and a removal one record each.
    assert alter(store, [entry(alice, ("producer_byte_rate", 1024.0))])[1] == []
    _, records = alter(store, [entry(alice, ("producer_byte_rate", 2048.0))])
    assert [mr.decode(r).value for r in records] == [2048.0]
    _, records = alter(store, [entry(alice, ("producer_byte_rate", None))])
    assert [mr.decode(r).remove for r in records] == [True]
    assert store.entities == {}
    # Removing what is not set is accepted and writes nothing.
    outcomes, records = alter(store, [entry(alice, ("consumer_byte_rate", None))])
    assert (outcomes[0].error, records) == (ErrorCode.NONE, [])


def test_validate_only_answers_as_the_change_would_and_keeps_nothing() -> None:
    store = QuotaStore()
    good = entry([("user", "a")], ("request_percentage", 12.5))
    bad = entry([("user", "b")], ("request_percentage", -1.0))
    outcomes, records = alter(store, [good, bad], validate_only=True)
    assert [o.error for o in outcomes] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert (records, store.entities) == ([], {})


@pytest.mark.parametrize(
    ("entity", "op", "message"),
    [
        ([], ("producer_byte_rate", 1.0), "Invalid empty client quota entity"),
        (
            [("group", "g")],
            ("producer_byte_rate", 1.0),
            "Unhandled client quota entity type: group",
        ),
        ([("user", "")], ("producer_byte_rate", 1.0), "Empty user not supported"),
        (
            [("ip", "127.0.0.1"), ("user", "a")],
            ("connection_creation_rate", 1.0),
            "Invalid quota entity combination, IP entity should not be combined with User or "
            "ClientId",
        ),
        ([("ip", "not an ip")], ("connection_creation_rate", 1.0), "not an ip is not a valid IP"),
        (
            [("ip", "::1")],
            ("producer_byte_rate", 1.0),
            "Invalid configuration key producer_byte_rate",
        ),
        ([("user", "a")], ("connection_creation_rate", 1.0), "Invalid configuration key"),
        ([("user", "a")], ("producer_byte_rate", 0.0), "Quota producer_byte_rate must be greater"),
        ([("user", "a")], ("producer_byte_rate", 1.5), "producer_byte_rate cannot be a fractional"),
        (
            [("user", "a")],
            ("producer_byte_rate", 1e19),
            "Proposed value for producer_byte_rate is too large for a LONG.",
        ),
        (
            [("ip", None)],
            ("connection_creation_rate", 3e9),
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
    ],
)
def test_kafkas_rules_refuse_an_entity_or_value(
    entity: list[tuple[str, str | None]], op: tuple[str, float], message: str
) -> None:
    store = QuotaStore()
    ((error, text),) = set_quotas(store, entry(entity, op))
    assert error is ErrorCode.INVALID_REQUEST
    assert text is not None and text.startswith(message), text
    assert store.entities == {}


def test_each_entity_stands_alone_and_a_repeated_one_is_ignored() -> None:
    store = QuotaStore()
    results = set_quotas(
        store,
        entry([("user", "a")], ("producer_byte_rate", 10.0)),
        entry([("user", "b")], ("producer_byte_rate", -1.0)),
        entry([("client-id", "c"), ("user", "a")], ("request_percentage", 0.5)),
        entry([("user", "a")], ("producer_byte_rate", 20.0)),
    )
    # One outcome per entity: the repeated user a's is Kafka's "Ignoring duplicate entity",
    # though its first entry stands.
    assert [e for e, _ in results] == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
    ]
    assert results[0] == (
        ErrorCode.INVALID_REQUEST,
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})",
    )
    assert store.entities == {
        (("user", "a"),): {"producer_byte_rate": 10.0},
        (("client-id", "c"), ("user", "a")): {"request_percentage": 0.5},
    }


def filtered(
    store: QuotaStore, *components: tuple[str, int, str | None], strict: bool = False
) -> set[Any]:
    found = describe(
        store, [Component(entity_type=t, match_type=m, match=n) for t, m, n in components], strict
    )
    return {entity for entity, _ in found}


def test_filters_match_as_kafkas_metadata_image_does() -> None:
    store = QuotaStore()
    quota = ("request_percentage", 1.0)
    for entity, op in [
        ([("user", "a")], quota),
        ([("user", None)], quota),
        ([("client-id", "c"), ("user", "a")], quota),
        ([("client-id", None)], quota),
        ([("ip", "10.0.0.1")], ("connection_creation_rate", 5.0)),
    ]:
        assert set_quotas(store, entry(entity, op)) == [(ErrorCode.NONE, None)]
    a, default, a_c = (("user", "a"),), (("user", None),), (("client-id", "c"), ("user", "a"))
    assert filtered(store, ("user", MATCH_EXACT, "a")) == {a, a_c}
    assert filtered(store, ("user", MATCH_EXACT, "a"), strict=True) == {a}
    assert filtered(store, ("user", MATCH_DEFAULT, None)) == {default}
    # "Specified" is any entity that has the type at all, its default included.
    assert filtered(store, ("user", MATCH_SPECIFIED, None)) == {a, default, a_c}
    assert filtered(store, ("user", MATCH_SPECIFIED, None), ("client-id", MATCH_EXACT, "c")) == {
        a_c
    }
    assert filtered(store, ("ip", MATCH_SPECIFIED, None)) == {(("ip", "10.0.0.1"),)}
    # No components: everything, unless strict (then only an empty entity, which cannot be).
    assert len(filtered(store)) == 5
    assert filtered(store, strict=True) == set()


@pytest.mark.parametrize(
    ("components", "error"),
    [
        ([("", MATCH_EXACT, "a")], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_EXACT, "a"), ("user", MATCH_DEFAULT, None)], ErrorCode.INVALID_REQUEST),
        ([("group", MATCH_EXACT, "g")], ErrorCode.UNSUPPORTED_VERSION),
        ([("user", MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_DEFAULT, "a")], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_SPECIFIED, "a")], ErrorCode.INVALID_REQUEST),
        ([("user", 7, None)], ErrorCode.INVALID_REQUEST),
        (
            [("ip", MATCH_SPECIFIED, None), ("client-id", MATCH_EXACT, "c")],
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_filters_kafka_refuses(
    components: list[tuple[str, int, str | None]], error: ErrorCode
) -> None:
    with pytest.raises(DescribeError) as refused:
        filtered(QuotaStore(), *components)
    assert refused.value.error is error
