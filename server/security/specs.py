"""ACLs written short, for `--acl`, `running(acls=[...])` and the pytest marker."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from minicoord.server.security.acls import (
    CLUSTER_NAME,
    WILDCARD,
    Acl,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)


def parse_acl(spec: str | Acl) -> Acl:
    """An ACL from a short spec, for `--acl` and `running(acls=[...])`:

        "allow User:alice Read group:orders"        literal group
        "deny User:* Write topic:audit- prefixed"    prefixed topic
        "allow User:bob All topic:* host=10.0.0.5"  every topic, from one host

    i.e. PERMISSION PRINCIPAL OPERATION TYPE:NAME, then optionally `prefixed` and `host=H`.
    Operations and types are Kafka's names in any case (Read, IdempotentWrite, cluster,
    transactional_id); a cluster ACL may omit its name.
    """
    if isinstance(spec, Acl):
        return spec
    words = spec.split()
    if len(words) < 4:
        raise InvalidAcl(f"ACL spec {spec!r}: PERMISSION PRINCIPAL OPERATION TYPE:NAME")
    permission, principal, operation, resource, *rest = words
    rtype_name, _, name = resource.partition(":")
    pattern, host = PatternType.LITERAL, WILDCARD
    for word in rest:
        if word.lower() == "prefixed":
            pattern = PatternType.PREFIXED
        elif word.lower().startswith("host="):
            host = word[5:]
        else:
            raise InvalidAcl(f"ACL spec {spec!r}: unexpected {word!r}")
    rtype = _member(ResourceType, rtype_name, "resource type", spec)
    acl = Acl(
        rtype,
        name or (CLUSTER_NAME if rtype is ResourceType.CLUSTER else ""),
        pattern,
        principal,
        host,
        _member(Operation, operation, "operation", spec),
        _member(Permission, permission, "permission", spec),
    )
    acl.validate()
    return acl


def _member(enum: type[IntEnum], word: str, kind: str, spec: str) -> Any:
    try:
        return enum[_enum_name(word)]
    except KeyError:
        raise InvalidAcl(f"ACL spec {spec!r}: unknown {kind} {word!r}") from None


def _enum_name(word: str) -> str:
    # IdempotentWrite, idempotent_write and IDEMPOTENT-WRITE all name IDEMPOTENT_WRITE.
    out = []
    for i, ch in enumerate(word.replace("-", "_")):
        if ch.isupper() and i and word[i - 1].islower():
            out.append("_")
        out.append(ch)
    return "".join(out).upper()
