"""ACLs and the authorizer, sans-IO: Kafka's codes, matching rules and an indexed store.

The rules are those of Kafka's StandardAuthorizer (KRaft):
- a super user (`super.users`, principals as `User:alice`) may do anything;
- an ACL applies to a resource when its pattern is LITERAL with the same name, LITERAL `*`,
  or PREFIXED with a prefix of the name; to a principal when it names the principal or
  `User:*`; to a host when it is `*` or the client's address;
- an ALLOW of Read, Write, Delete or Alter also allows Describe, an ALLOW of AlterConfigs
  also allows DescribeConfigs, and All matches every operation (implication is for ALLOW
  only: a DENY of Read does not deny Describe);
- any applicable DENY wins over any ALLOW; with no applicable ALLOW the answer is no, unless
  the resource has no ACL at all (whoever it names) and `allow.everyone.if.no.acl.found`.

Decisions are cached per (principal, host, operation, resource type, name); any change to the
ACLs drops the cache, so a check in steady state is one dict lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from enum import IntEnum
from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass

if TYPE_CHECKING:
    import uuid

log = logging.getLogger("minicoord.authorizer")


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

_IMPLY_DESCRIBE = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
_IMPLY_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})

# The operations each resource type reports in authorized-operations bitfields (Kafka's
# AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}


class InvalidAcl(ValueError):
    """An ACL or filter Kafka answers INVALID_REQUEST for."""


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL binding: a resource pattern and an access control entry."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def validate(self) -> None:
        """Raise InvalidAcl where Kafka's controller refuses to create this ACL."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        if not self.name:
            # The broker's check (AclApis), made before the controller's own.
            raise InvalidAcl("Invalid empty resource name")
        if self.resource_type is ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        kind, colon, who = self.principal.partition(":")
        if not colon or not kind or not who:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}`")

    def grants(self, operation: Operation) -> bool:
        """Whether this ACL's operation covers `operation` (implication for ALLOW only)."""
        mine = self.operation
        if mine is Operation.ALL or mine is operation:
            return True
        if self.permission is not Permission.ALLOW:
            return False
        if operation is Operation.DESCRIBE:
            return mine in _IMPLY_DESCRIBE
        if operation is Operation.DESCRIBE_CONFIGS:
            return mine in _IMPLY_DESCRIBE_CONFIGS
        return False

    def covers(self, name: str) -> bool:
        """Whether this ACL's pattern applies to the resource named `name`."""
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: None (or ANY) fields match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def validate(self) -> None:
        unknown = (
            self.resource_type is ResourceType.UNKNOWN
            or self.pattern_type is PatternType.UNKNOWN
            or self.operation is Operation.UNKNOWN
            or self.permission is Permission.UNKNOWN
        )
        if unknown:
            raise InvalidAcl("The filter has an UNKNOWN field")

    def matches(self, acl: Acl) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != acl.pattern_type:
            return False
        if self.name is not None:
            if wanted is PatternType.MATCH and acl.pattern_type is not wanted:
                # MATCH: every ACL that would apply to a resource of this exact name.
                if not acl.covers(self.name):
                    return False
            elif self.name != acl.name:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation is not Operation.ANY and self.operation != acl.operation:
            return False
        return self.permission is Permission.ANY or self.permission == acl.permission


class AclStore:
    """Every ACL by id, indexed by resource for checks, with a decision cache."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._by_id: dict[uuid.UUID, Acl] = {}
        self._ids: dict[Acl, uuid.UUID] = {}
        # (resource type, literal name) -> ACLs; `*` is a literal name here too.
        self._literal: dict[tuple[ResourceType, str], list[Acl]] = {}
        self._prefixed: dict[ResourceType, list[Acl]] = {}
        self._cache: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        # Bumped by every change, for answers cached elsewhere (Metadata) to key on.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Acl]:
        return iter(self._by_id.values())

    def __contains__(self, acl: object) -> bool:
        return acl in self._ids

    def items(self) -> list[tuple[uuid.UUID, Acl]]:
        return list(self._by_id.items())

    # -- changes (the caller persists the records first; replay calls these too) -----------

    def add(self, acl: Acl, acl_id: uuid.UUID | None = None) -> uuid.UUID | None:
        """Add an ACL; its new id, or None if an identical ACL exists (as Kafka, no-op)."""
        if acl in self._ids:
            return None
        if acl_id is None:
            import uuid  # not at start: see topics.new_topic_id

            acl_id = uuid.uuid4()
        self._by_id[acl_id] = acl
        self._ids[acl] = acl_id
        if acl.pattern_type is PatternType.PREFIXED:
            self._prefixed.setdefault(acl.resource_type, []).append(acl)
        else:
            self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
        self._cache.clear()
        self.generation += 1
        return acl_id

    def remove(self, acl_id: uuid.UUID) -> Acl | None:
        acl = self._by_id.pop(acl_id, None)
        if acl is None:
            return None
        del self._ids[acl]
        if acl.pattern_type is PatternType.PREFIXED:
            self._prefixed[acl.resource_type].remove(acl)
        else:
            self._literal[(acl.resource_type, acl.name)].remove(acl)
        self._cache.clear()
        self.generation += 1
        return acl

    def matching(self, flt: AclFilter) -> list[tuple[uuid.UUID, Acl]]:
        return [(acl_id, acl) for acl_id, acl in self._by_id.items() if flt.matches(acl)]

    # -- checks ---------------------------------------------------------------------------

    def authorize(
        self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str
    ) -> bool:
        # `host` may come in the connection's "/10.0.0.5" form: cached as given, so that a
        # cached check allocates nothing; stripped only to decide.
        key = (principal, host, op, rtype, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host.lstrip("/"), op, rtype, name)
            if not decision:
                # Like Kafka's authorizer log, but once per principal, host, operation and
                # resource until the ACLs change, not once per request.
                log.info(
                    "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                    principal,
                    op.name,
                    host.lstrip("/"),
                    rtype.name,
                    name,
                )
            if len(self._cache) > 100_000:
                self._cache.clear()  # bounded: many distinct names must not grow it forever
            self._cache[key] = decision
        return decision

    def _applicable(self, rtype: ResourceType, name: str) -> Iterator[Acl]:
        yield from self._literal.get((rtype, name), ())
        if name != WILDCARD:
            yield from self._literal.get((rtype, WILDCARD), ())
        for acl in self._prefixed.get(rtype, ()):
            if name.startswith(acl.name):
                yield acl

    def _decide(
        self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        any_acl = allowed = False
        for acl in self._applicable(rtype, name):
            any_acl = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if not acl.grants(op):
                continue
            if acl.permission is Permission.DENY:
                return False
            allowed = True
        return allowed or (not any_acl and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether `op` is allowed on some resource of the type (Kafka's
        authorizeByResourceType, used for idempotent producers with Write on any topic)."""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        host = host.lstrip("/")
        deny_literal: set[str] = set()
        deny_prefix: list[str] = []
        allow: list[Acl] = []
        for acl in self._by_id.values():
            if acl.resource_type != rtype:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation is not op and acl.operation is not Operation.ALL:
                continue
            if acl.permission is Permission.DENY:
                if acl.pattern_type is PatternType.LITERAL and acl.name == WILDCARD:
                    return False
                (deny_prefix.append if acl.pattern_type is PatternType.PREFIXED else
                 deny_literal.add)(acl.name)  # fmt: skip
            else:
                allow.append(acl)
        for acl in allow:
            if acl.pattern_type is PatternType.LITERAL:
                if acl.name == WILDCARD:
                    return True
                if acl.name in deny_literal:
                    continue
            if not any(acl.name.startswith(prefix) for prefix in deny_prefix):
                return True
        return False

    def authorized_operations(
        self, principal: str, host: str, rtype: ResourceType, name: str
    ) -> int:
        """Kafka's authorized-operations bitfield: bit `op` set for each op allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(rtype, ()):
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << op
        return bits
