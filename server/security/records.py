"""ACLs in the cluster metadata log, as KRaft keeps them.

CreateAcls writes an AccessControlEntryRecord per new ACL and DeleteAcls a
RemoveAccessControlEntryRecord per removed one, before answering; at start `replay` rebuilds
the store from them. A server without an authorizer still replays them (into a store nobody
checks), so switching the authorizer off and on again keeps the ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from minicoord.protocol import metadata_records as mr
from minicoord.server.security.acls import (
    Acl,
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

if TYPE_CHECKING:
    import uuid

    from minicoord.server.handlers.base import RequestContext


def to_record(acl_id: uuid.UUID, acl: Acl) -> bytes:
    return mr.encode(
        mr.AccessControlEntryRecord(
            id=acl_id,
            resource_type=int(acl.resource_type),
            resource_name=acl.name,
            pattern_type=int(acl.pattern_type),
            principal=acl.principal,
            host=acl.host,
            operation=int(acl.operation),
            permission_type=int(acl.permission),
        )
    )


def replay(record: Any, store: AclStore) -> bool:
    """Apply an ACL record read back at start; False if it is not an ACL record."""
    if isinstance(record, mr.AccessControlEntryRecord):
        try:
            acl = Acl(
                ResourceType(record.resource_type),
                record.resource_name,
                PatternType(record.pattern_type),
                record.principal,
                record.host,
                Operation(record.operation),
                Permission(record.permission_type),
            )
        except ValueError:
            return True  # a code this version does not know: skipped, as unknown records are
        store.add(acl, record.id)
        return True
    if isinstance(record, mr.RemoveAccessControlEntryRecord):
        store.remove(record.id)
        return True
    return False


def create(store: AclStore, acls: Iterable[Acl]) -> list[bytes]:
    """Add valid, new ACLs to the store; the records to persist (callers validate first)."""
    records = []
    for acl in acls:
        acl_id = store.add(acl)
        if acl_id is not None:
            records.append(to_record(acl_id, acl))
    return records


def delete(store: AclStore, filters: Iterable[AclFilter]) -> tuple[list[list[Acl]], list[bytes]]:
    """Remove every ACL each filter matches: the ACLs per filter, and the records to persist.

    An ACL two filters match is reported for both, as Kafka reports it.
    """
    per_filter: list[list[Acl]] = []
    records: list[bytes] = []
    removed: set[uuid.UUID] = set()
    for flt in filters:
        matched = store.matching(flt)
        per_filter.append([acl for _, acl in matched])
        removed.update(acl_id for acl_id, _ in matched)
    for acl_id in removed:
        store.remove(acl_id)
        records.append(mr.encode(mr.RemoveAccessControlEntryRecord(id=acl_id)))
    return per_filter, records


# The UNKNOWN code (0) of every ACL enum: Kafka's request classes refuse it while parsing,
# in these fields of a DescribeAcls request or DeleteAcls filter, and of a CreateAcls creation.
_UNKNOWN = 0
FILTER_FIELDS = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")
CREATION_FIELDS = ("resource_type", "resource_pattern_type", "operation", "permission_type")


def unparseable(ctx: RequestContext, entries: Iterable[Any], fields: tuple[str, ...]) -> bool:
    """Whether an ACL request carries UNKNOWN (0) in one of `fields` of an entry; if so, its
    connection is closed with a log line. Kafka's DescribeAclsRequest, DeleteAclsRequest and
    CreateAclsRequest refuse that as they are parsed, before anything is looked at, so Kafka's
    SocketServer closes the connection and nothing is answered or done. (A code Kafka does
    not know at all parses, and is refused with INVALID_REQUEST later, as here.)"""
    if not any(getattr(e, f) == _UNKNOWN for e in entries for f in fields):
        return False
    ctx.channel.abort(
        f"invalid {ctx.spec.name} v{ctx.version} request: it contains UNKNOWN elements "
        f"({', '.join(fields)})"
    )
    return True


def _code(enum: Any, value: int) -> Any:
    # A code this version does not know decodes as UNKNOWN, which validation then refuses.
    try:
        return enum(value)
    except ValueError:
        return enum.UNKNOWN


def acl_from_wire(c: Any, version: int) -> Acl:
    """A CreateAcls creation as an ACL (v0 had no pattern type: literal)."""
    return Acl(
        _code(ResourceType, c.resource_type),
        c.resource_name,
        _code(PatternType, c.resource_pattern_type) if version >= 1 else PatternType.LITERAL,
        c.principal,
        c.host,
        _code(Operation, c.operation),
        _code(Permission, c.permission_type),
    )


def filter_from_wire(f: Any, version: int) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter as a filter."""
    return AclFilter(
        _code(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _code(PatternType, f.pattern_type_filter) if version >= 1 else PatternType.LITERAL,
        f.principal_filter,
        f.host_filter,
        _code(Operation, f.operation),
        _code(Permission, f.permission_type),
    )
