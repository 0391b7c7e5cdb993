"""The authorizer's rules (Kafka's StandardAuthorizer), filters, specs and durable replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from minicoord.server.broker import Broker
from minicoord.server.config import Config, ConfigError, with_authorizer
from minicoord.server.security import records
from minicoord.server.security.acls import (
    Acl,
    AclFilter,
    AclStore,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from minicoord.server.security.specs import parse_acl
from minicoord.storage.log import LogManager

ALICE = "User:alice"
BOB = "User:bob"
HOST = "127.0.0.1"
G = ResourceType.GROUP
T = ResourceType.TOPIC
R = Operation.READ
D = Operation.DESCRIBE


def store(*specs: str, **kwargs: object) -> AclStore:
    s = AclStore(**kwargs)  # type: ignore[arg-type]
    for spec in specs:
        s.add(parse_acl(spec))
    return s


def test_literal_matches_only_its_name() -> None:
    s = store("allow User:alice Read group:orders")
    assert s.authorize(ALICE, HOST, R, G, "orders")
    assert not s.authorize(ALICE, HOST, R, G, "orders-2")
    assert not s.authorize(ALICE, HOST, R, G, "order")
    assert not s.authorize(ALICE, HOST, R, T, "orders")  # another resource type


def test_prefixed_matches_names_starting_with_it() -> None:
    s = store("allow User:alice Read group:app- prefixed")
    assert s.authorize(ALICE, HOST, R, G, "app-")
    assert s.authorize(ALICE, HOST, R, G, "app-one")
    assert not s.authorize(ALICE, HOST, R, G, "app")
    assert not s.authorize(ALICE, HOST, R, G, "other")


def test_literal_wildcard_name_matches_everything() -> None:
    s = store("allow User:alice Read topic:*")
    assert s.authorize(ALICE, HOST, R, T, "anything")
    assert not s.authorize(BOB, HOST, R, T, "anything")


def test_deny_beats_allow_whatever_the_pattern() -> None:
    s = store(
        "allow User:alice Read group:*",
        "allow User:alice Read group:app- prefixed",
        "deny User:alice Read group:app-secret",
    )
    assert s.authorize(ALICE, HOST, R, G, "app-one")
    assert not s.authorize(ALICE, HOST, R, G, "app-secret")
    s.add(parse_acl("deny User:* Read group:app- prefixed"))
    assert not s.authorize(ALICE, HOST, R, G, "app-one")
    assert s.authorize(ALICE, HOST, R, G, "other")


def test_principal_wildcard() -> None:
    s = store("allow User:* Read group:g")
    assert s.authorize(ALICE, HOST, R, G, "g")
    assert s.authorize("User:ANONYMOUS", HOST, R, G, "g")


def test_host_is_wildcard_or_exact() -> None:
    s = store("allow User:alice Read group:g host=10.0.0.5")
    assert s.authorize(ALICE, "10.0.0.5", R, G, "g")
    assert s.authorize(ALICE, "/10.0.0.5", R, G, "g")  # the connection's form
    assert not s.authorize(ALICE, HOST, R, G, "g")


def test_super_users_may_do_anything_even_when_denied() -> None:
    s = store("deny User:* All topic:*", super_users=["User:admin"])
    assert s.authorize("User:admin", HOST, Operation.WRITE, T, "t")
    assert not s.authorize(ALICE, HOST, Operation.WRITE, T, "t")


@pytest.mark.parametrize("allow_if_none", [False, True])
def test_allow_everyone_if_no_acl_found(allow_if_none: bool) -> None:
    s = store("allow User:bob Read group:bobs", allow_if_no_acl=allow_if_none)
    # No ACL on "free": the default decides.
    assert s.authorize(ALICE, HOST, R, G, "free") is allow_if_none
    # An ACL on "bobs" (for someone else): denied whatever the default.
    assert not s.authorize(ALICE, HOST, R, G, "bobs")


def test_read_write_delete_alter_imply_describe_for_allow_only() -> None:
    for op in ("Read", "Write", "Delete", "Alter"):
        s = store(f"allow User:alice {op} topic:t")
        assert s.authorize(ALICE, HOST, D, T, "t"), op
        assert not s.authorize(ALICE, HOST, Operation.CREATE, T, "t")
    s = store("allow User:alice AlterConfigs topic:t")
    assert s.authorize(ALICE, HOST, Operation.DESCRIBE_CONFIGS, T, "t")
    assert not s.authorize(ALICE, HOST, D, T, "t")
    # A deny of Read does not deny Describe.
    s = store("allow User:alice Describe topic:t", "deny User:alice Read topic:t")
    assert s.authorize(ALICE, HOST, D, T, "t")
    assert not s.authorize(ALICE, HOST, R, T, "t")


def test_all_matches_every_operation_both_ways() -> None:
    s = store("allow User:alice All topic:t")
    for op in (R, Operation.WRITE, D, Operation.ALTER_CONFIGS, Operation.DELETE):
        assert s.authorize(ALICE, HOST, op, T, "t")
    s.add(parse_acl("deny User:alice All topic:t"))
    assert not s.authorize(ALICE, HOST, D, T, "t")


def test_cache_is_dropped_when_acls_change() -> None:
    s = store("allow User:alice Read group:g")
    assert s.authorize(ALICE, HOST, R, G, "g")
    acl_id = s.add(parse_acl("deny User:alice Read group:g"))
    assert acl_id is not None
    assert not s.authorize(ALICE, HOST, R, G, "g")
    s.remove(acl_id)
    assert s.authorize(ALICE, HOST, R, G, "g")


def test_identical_acl_is_added_once() -> None:
    s = store("allow User:alice Read group:g")
    assert s.add(parse_acl("allow User:alice Read group:g")) is None
    assert len(s) == 1


def test_authorize_any_topic_for_idempotent_writes() -> None:
    s = store("allow User:alice Write topic:t")
    assert s.authorize_any(ALICE, HOST, Operation.WRITE, T)
    assert not s.authorize_any(BOB, HOST, Operation.WRITE, T)
    s.add(parse_acl("deny User:alice Write topic:t"))
    assert not s.authorize_any(ALICE, HOST, Operation.WRITE, T)
    s = store("allow User:alice Write topic:app-x", "deny User:alice Write topic:app- prefixed")
    assert not s.authorize_any(ALICE, HOST, Operation.WRITE, T)


def test_authorized_operations_bitfield() -> None:
    s = store("allow User:alice Read group:g")
    bits = s.authorized_operations(ALICE, HOST, G, "g")
    assert bits == (1 << Operation.READ) | (1 << Operation.DESCRIBE)


def _acl(name: str, pattern: PatternType = PatternType.LITERAL, principal: str = ALICE) -> Acl:
    return Acl(T, name, pattern, principal, "*", R, Permission.ALLOW)


def test_filters_any_match_and_exact() -> None:
    acls = [
        _acl("orders"),
        _acl("*"),
        _acl("ord", PatternType.PREFIXED),
        _acl("x", PatternType.PREFIXED),
        _acl("orders", principal=BOB),
    ]

    def names(flt: AclFilter) -> list[tuple[str, PatternType]]:
        return sorted((a.name, a.pattern_type) for a in acls if flt.matches(a))

    lit, pre = PatternType.LITERAL, PatternType.PREFIXED
    # ANY: every pattern type, the name exactly.
    assert names(AclFilter(T, "orders", PatternType.ANY, ALICE)) == [("orders", lit)]
    # MATCH: every ACL that applies to a resource of that name.
    assert names(AclFilter(T, "orders", PatternType.MATCH, ALICE)) == [
        ("*", lit),
        ("ord", pre),
        ("orders", lit),
    ]
    # A concrete pattern type: exactly that pattern.
    assert names(AclFilter(T, "ord", PatternType.PREFIXED)) == [("ord", pre)]
    # Null name, any principal: everything of the type.
    assert len(names(AclFilter(T))) == 5
    assert names(AclFilter(G)) == []
    with pytest.raises(InvalidAcl):
        AclFilter(ResourceType.UNKNOWN).validate()


def test_delete_reports_per_filter_and_removes_once() -> None:
    s = store("allow User:alice Read topic:a", "allow User:bob Read topic:a")
    matched, recs = records.delete(s, [AclFilter(T, "a"), AclFilter(principal=ALICE)])
    assert [len(m) for m in matched] == [2, 1]
    assert len(recs) == 2 and len(s) == 0


@pytest.mark.parametrize(
    "spec",
    [
        "allow User:alice Read group:",  # empty name
        "allow alice Read group:g",  # principal without a type
        "allow User:alice Any group:g",
        "allow User:alice Read any:g",
        "maybe User:alice Read group:g",
        "allow User:alice Read cluster:other",
        "allow User:alice Read group:g sideways",
    ],
)
def test_invalid_specs_are_refused(spec: str) -> None:
    with pytest.raises(InvalidAcl):
        parse_acl(spec)


def test_spec_forms() -> None:
    acl = parse_acl("deny User:* IdempotentWrite cluster")
    assert acl.operation is Operation.IDEMPOTENT_WRITE and acl.name == "kafka-cluster"
    acl = parse_acl("allow User:a describe_configs transactional_id:tx host=1.2.3.4")
    assert acl.resource_type is ResourceType.TRANSACTIONAL_ID and acl.host == "1.2.3.4"


def test_authorizer_class_names() -> None:
    for name in (
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
    ):
        assert Config.from_pairs({"authorizer.class.name": name}).authorizer_enabled
    assert not Config().authorizer_enabled
    with pytest.raises(ConfigError):
        Config.from_pairs({"authorizer.class.name": "com.example.Mine"})
    config = Config.from_pairs({"super.users": "User:a; User:b"})
    assert config.super_user_set == {"User:a", "User:b"}


def test_acls_or_super_users_given_switch_the_authorizer_on() -> None:
    assert with_authorizer([("a", "1")], [], []) == [("a", "1")]
    pairs = dict(
        with_authorizer([("super.users", "User:x")], ["allow User:a Read group:g"], ["User:y"])
    )
    assert pairs["authorizer.class.name"].endswith("StandardAuthorizer")
    assert pairs["super.users"] == "User:x;User:y"
    # Switched off explicitly: kept off.
    off = dict(with_authorizer([("authorizer.class.name", "")], ["allow User:a Read group:g"], []))
    assert off["authorizer.class.name"] == ""


def _broker(data_dir: Path) -> Broker:
    config = Config.from_pairs(
        {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    )
    broker = Broker(config, logs=LogManager(data_dir))
    broker.open_metadata()
    return broker


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    broker.create_topic("t", 1)
    broker.add_acls(
        [parse_acl("allow User:alice Read group:g"), parse_acl("deny User:* Write topic:t")]
    )
    _, recs = records.delete(broker.acls, [AclFilter(principal="User:*")])
    broker.persist_metadata(recs)
    broker.add_acls([parse_acl("allow User:bob Read group:app- prefixed")])
    broker.close()

    again = _broker(tmp_path)
    kept = sorted((a.principal, a.name, a.pattern_type) for a in again.acls)
    assert kept == [(ALICE, "g", PatternType.LITERAL), (BOB, "app-", PatternType.PREFIXED)]
    assert again.topics.get("t") is not None  # topics replay alongside
    assert again.authorizer is not None
    assert again.authorizer.authorize(BOB, HOST, R, G, "app-1")
    # The same ACLs given again at start are not written twice.
    again.add_acls([parse_acl("allow User:alice Read group:g")])
    assert len(again.acls) == 2
    again.close()


def test_a_denial_is_logged_once_until_the_acls_change(caplog: pytest.LogCaptureFixture) -> None:
    s = store("deny User:alice Read group:g")
    with caplog.at_level("INFO", logger="minicoord.authorizer"):
        for _ in range(3):
            assert not s.authorize(ALICE, "/10.0.0.5", R, G, "g")
        lines = [r.getMessage() for r in caplog.records]
        assert lines == [
            "Principal = User:alice is Denied operation = READ from host = 10.0.0.5 "
            "on resource = GROUP:g"
        ]
        s.add(parse_acl("allow User:bob Read group:g"))
        assert not s.authorize(ALICE, "/10.0.0.5", R, G, "g")
        assert len(caplog.records) == 2
