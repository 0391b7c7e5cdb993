"""Reject requests that Kafka's own generated readers refuse and kafka-python's accept.

- A null in a non-nullable field: kafka-python's decoders read a length of -1 as None for any
  string or array, nullable or not. Handlers rely on the schema (a non-nullable array is a
  list), so the connection checks decoded requests here and closes the connection on a
  violation, as Kafka does with an invalid request.
- A field that runs past its frame: kafka-python cuts a string or bytes field (a Produce's
  records) at the end of the data it was given; Kafka's reader fails on the missing bytes.
"""

from __future__ import annotations

from typing import Any

# (attribute, nullable, nested plan or None, is_array) per field present at a version
Plan = tuple[tuple[str, bool, Any, bool], ...]


_PLANS: dict[tuple[int, int], Plan] = {}
_NULLABLE_KINDS = frozenset({"string", "bytes", "records"})
# The nested plan of an array of strings or bytes: its elements may never be null (Kafka's
# schemas have no nullable array elements).
ELEMENTS = "elements"


def _plan(struct: Any, version: int) -> Plan:
    # Schema objects are not hashable; they live as long as the process, so key by identity.
    key = (id(struct), version)
    cached = _PLANS.get(key)
    if cached is not None:
        return cached
    plan = []
    for field in struct.fields.values():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue  # absent at this version, or tagged (optional by definition)
        if not (field.is_array() or field.is_struct() or field.type_str in _NULLABLE_KINDS):
            # Fixed-size types have no null on the wire; kafka-python reads an all-zero
            # uuid as None, which is a value, not a null.
            continue
        nested: Any = None
        if field.is_struct_array() or field.is_struct():
            nested = _plan(field, version)
        elif field.type_str in ("[]string", "[]bytes"):
            nested = ELEMENTS
        plan.append(
            (field.name, bool(field.nullable_for_version_q(version)), nested, field.is_array())
        )
    _PLANS[key] = result = tuple(plan)
    return result


def null_violation(request: Any, version: int) -> str | None:
    """The path of the first non-nullable field that is null, or None if there is none."""
    return _check(request, _plan(type(request)._struct, version))


def _check(obj: Any, plan: Plan) -> str | None:
    for name, nullable, nested, is_array in plan:
        value = getattr(obj, name, None)
        if value is None:
            if not nullable:
                return name
            continue
        if nested is None:
            continue
        if nested is ELEMENTS:
            if None in value:
                return f"{name}[]"
            continue
        for item in value if is_array else (value,):
            inner = _check(item, nested)
            if inner is not None:
                return f"{name}.{inner}"
    return None


_DECODERS: dict[tuple[int, int], Any] = {}


def decode_whole(cls: Any, data: memoryview, version: int) -> Any:
    """The request in `data`, decoded as `cls.decode` does; ValueError if its fields claim
    more bytes than `data` holds."""
    key = (id(cls), version)
    decoder = _DECODERS.get(key)
    if decoder is None:
        flexible = cls.flexible_version_q(version)
        decoder = _DECODERS[key] = cls._struct.compiled_decode_from(
            version, compact=flexible, tagged=flexible, data_class=cls[None]
        )
    request, end = decoder(data, 0)
    if end > len(data):
        raise ValueError(f"its fields run {end - len(data)} bytes past the end of its frame")
    return request
