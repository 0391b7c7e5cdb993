"""Client quotas (KIP-546): AlterClientQuotas and DescribeClientQuotas, sans-IO.

Kept as Kafka's controller keeps them: each key set or removed is a ClientQuotaRecord in the
cluster metadata log, so quotas survive a restart, and the replay applies the same records.
Validated and described with Kafka's rules (ClientQuotaControlManager, ClientQuotasImage):
an entity is a user, a client id or both, or an IP address alone, each named or the default
(a null name); users and client ids take producer_byte_rate, consumer_byte_rate (whole
numbers), request_percentage and controller_mutation_rate; an IP takes
connection_creation_rate (a whole number). Quotas are stored and described, not enforced: no
request is throttled for them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from minicoord.protocol import metadata_records as mr
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
# DescribeClientQuotas' match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
# Kafka's QuotaConfig: each kind of entity's keys, with the largest whole value each takes
# (None: a fraction is fine).
_USER_AND_CLIENT_KEYS: dict[str, int | None] = {
    "producer_byte_rate": _LONG_MAX,
    "consumer_byte_rate": _LONG_MAX,
    "request_percentage": None,
    "controller_mutation_rate": None,
}
_IP_KEYS: dict[str, int | None] = {"connection_creation_rate": _INT_MAX}

# An entity: its (type, name) pairs in type order; a None name is its type's default.
Entity = tuple[tuple[str, str | None], ...]


def _entity_text(entity: Iterable[tuple[str, str | None]]) -> str:
    """An entity as Kafka's messages print one (ClientQuotaEntity.toString)."""
    pairs = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{pairs}}})"


class QuotaStore:
    """Every entity's quotas, in the order the entities were first given one."""

    def __init__(self) -> None:
        self.entities: dict[Entity, dict[str, float]] = {}

    def __len__(self) -> int:
        """How many keys are set, over all entities (a record each)."""
        return sum(len(values) for values in self.entities.values())

    def apply(self, record: Any) -> None:
        """A ClientQuotaRecord, from the log or just written."""
        entity = tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))
        if record.remove:
            values = self.entities.get(entity)
            if values is not None:
                values.pop(record.key, None)
                if not values:
                    del self.entities[entity]
        else:
            self.entities.setdefault(entity, {})[record.key] = record.value

    def snapshot(self) -> list[bytes]:
        """The records that rebuild every quota set."""
        return [
            mr.encode(_record(entity, key, value))
            for entity, values in self.entities.items()
            for key, value in values.items()
        ]


def _record(entity: Entity, key: str, value: float | None) -> Any:
    entity_cls = mr.ClientQuotaRecord.EntityData
    return mr.ClientQuotaRecord(
        entity=[entity_cls(entity_type=kind, entity_name=name) for kind, name in entity],
        key=key,
        value=0.0 if value is None else value,
        remove=value is None,
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    entity: Entity
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def alter(
    store: QuotaStore, entries: Iterable[Any], validate_only: bool = False
) -> tuple[list[Outcome], list[bytes]]:
    """AlterClientQuotas' entries: an outcome per entity, and the records of what changed
    (none when `validate_only`). Each entity stands or fails alone, as in Kafka; a change is
    written only for a key whose value moves."""
    outcomes: dict[Entity, Outcome] = {}
    records: list[Any] = []
    for entry in entries:
        # As Kafka reads the request: the entity is a map, a type named twice keeps the last.
        named = {e.entity_type: e.entity_name for e in entry.entity}
        entity = tuple(sorted(named.items()))
        ops: dict[str, float | None] = {}
        duplicate_key = False
        for op in entry.ops:
            duplicate_key = duplicate_key or op.key in ops
            ops[op.key] = None if op.remove else op.value
        if duplicate_key or entity in outcomes:
            # Kafka's result for either: the entry is ignored (a repeated entity's first entry
            # still stands).
            message = f"Ignoring duplicate entity {_entity_text(entity)}"
            outcomes[entity] = Outcome(entity, ErrorCode.INVALID_REQUEST, message)
            continue
        error, made = _alter_entity(store, entity, ops)
        outcomes[entity] = Outcome(entity, *error) if error else Outcome(entity)
        records += made
    if validate_only:
        return list(outcomes.values()), []
    for record in records:
        store.apply(record)
    return list(outcomes.values()), [mr.encode(r) for r in records]


def _alter_entity(
    store: QuotaStore, entity: Entity, ops: dict[str, float | None]
) -> tuple[tuple[ErrorCode, str] | None, list[Any]]:
    """(the error, if any) and the records of one entity's changes."""
    keys, refused = _keys_of(entity)
    if refused is not None:
        return (ErrorCode.INVALID_REQUEST, refused), []
    current = store.entities.get(entity, {})
    made = []
    for key, value in ops.items():
        if value is None:
            if key in current:
                made.append(_record(entity, key, None))
            continue
        refused = _refused_value(keys, key, value)
        if refused is not None:
            return (ErrorCode.INVALID_REQUEST, refused), []
        if current.get(key) != value:
            made.append(_record(entity, key, value))
    return None, made


def _keys_of(entity: Entity) -> tuple[dict[str, int | None], str | None]:
    """The keys the entity takes, or why it cannot have quotas."""
    if not entity:
        return {}, "Invalid empty client quota entity"
    types = dict(entity)
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID, IP):
            return {}, f"Unhandled client quota entity type: {kind}"
        if name == "":
            return {}, f"Empty {kind} not supported"
    if IP in types:
        if len(types) > 1:
            return {}, (
                "Invalid quota entity combination, IP entity should not be combined with "
                "User or ClientId"
            )
        address = types[IP]
        if address is not None and not _is_ip(address):
            # Kafka also takes a host name it can resolve; resolving here would block the
            # event loop, so only addresses are taken.
            return {}, f"{address} is not a valid IP or resolvable host."
        return _IP_KEYS, None
    return _USER_AND_CLIENT_KEYS, None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _refused_value(keys: dict[str, int | None], key: str, value: float) -> str | None:
    if key not in keys:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    largest = keys[key]
    if largest is None:
        return None
    if value > largest:
        kind = "an INT" if largest == _INT_MAX else "a LONG"
        return f"Proposed value for {key} is too large for {kind}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


class DescribeError(Exception):
    """A filter Kafka refuses: the whole answer is this error."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def describe(
    store: QuotaStore, components: Iterable[Any], strict: bool
) -> list[tuple[Entity, list[tuple[str, float]]]]:
    """The entities DescribeClientQuotas' filter matches, each with its quotas (by key);
    DescribeError for a filter Kafka refuses."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise DescribeError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise DescribeError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        if kind not in (USER, CLIENT_ID, IP):
            raise DescribeError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise DescribeError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[kind] = c.match
        elif c.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if c.match is not None:
                which = "DEFAULT" if c.match_type == MATCH_DEFAULT else "SPECIFIED"
                raise DescribeError(
                    ErrorCode.INVALID_REQUEST,
                    f"Request specified MATCH_TYPE_{which}, but also specified a match string.",
                )
            if c.match_type == MATCH_DEFAULT:
                exact[kind] = None
            else:
                specified.add(kind)
        else:
            raise DescribeError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = exact.keys() | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise DescribeError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    found = []
    for entity, values in store.entities.items():
        types = dict(entity)
        if strict and len(types) != len(named):
            continue
        if all(kind in types and types[kind] == name for kind, name in exact.items()) and all(
            kind in types for kind in specified
        ):
            found.append((entity, sorted(values.items())))
    return found
