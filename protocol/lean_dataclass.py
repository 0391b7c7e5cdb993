"""`dataclasses.dataclass`, with one shared `__repr__`, `__eq__`, `__hash__` and frozen
`__setattr__`/`__delattr__` for every class instead of five compiled for each.

The standard decorator writes each of those methods as source text and compiles it per class:
a code object, its line table and its constants for every method of every dataclass, about
0.4 MB of a serving process's 25 MB for seventy classes. The methods here read the same fields
(the class's own tuple of names, made once) and behave as the generated ones do: equality by
the compared fields only between objects of the same class, a hash of those fields for frozen
classes with equality and none for mutable ones, a repr of the repr'd fields under the class's
qualified name, and `FrozenInstanceError` on assignment or deletion. `__init__` is still
generated: construction is on the hot paths, and a generic one would be slower.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def dataclass(
    cls: T | None = None,
    /,
    *,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = False,
    **options: Any,
) -> Any:
    """Drop-in for `dataclasses.dataclass` (without `order` or `unsafe_hash`)."""

    def wrap(cls: T) -> T:
        return _decorate(cls, repr, eq, frozen, options)

    return wrap if cls is None else wrap(cls)


def _decorate(cls: T, repr_: bool, eq: bool, frozen: bool, options: dict[str, Any]) -> T:
    if options.get("order") or options.get("unsafe_hash"):
        raise TypeError("order and unsafe_hash are not supported; use dataclasses.dataclass")
    own = cls.__dict__
    # What the standard decorator leaves alone: methods the class defines itself, and a
    # `__hash__` it sets explicitly (Python's implicit `None` beside an own `__eq__` is not).
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    add_repr = repr_ and "__repr__" not in own
    add_eq = eq and "__eq__" not in own
    new: Any = dataclasses.dataclass(cls, repr=False, eq=False, frozen=frozen, **options)
    fields = dataclasses.fields(new)
    if add_repr:
        new.__repr_fields__ = tuple(f.name for f in fields if f.repr)
        new.__repr__ = _repr
    if add_eq:
        new.__compare_key__ = _key(tuple(f.name for f in fields if f.compare))
        new.__eq__ = _eq
    if eq and not explicit_hash:
        if frozen:
            new.__hash_key__ = _key(
                tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            )
            new.__hash__ = _hash
        else:
            new.__hash__ = None
    if frozen:
        # Replaces the pair the decorator compiled for this class, which is then let go.
        new.__frozen_fields__ = frozenset(f.name for f in fields)
        new.__setattr__ = _frozen_setattr
        new.__delattr__ = _frozen_delattr
    return new


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    # Always a tuple, as the generated methods compare and hash (`attrgetter` of one name
    # returns the bare value); static, so that reading it through an instance does not bind.
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        get = attrgetter(names[0])
        return staticmethod(lambda obj: (get(obj),))
    return staticmethod(lambda obj: ())


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    cls = type(self)
    body = ", ".join(f"{name}={getattr(self, name)!r}" for name in cls.__repr_fields__)
    return f"{cls.__qualname__}({body})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self.__compare_key__
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__hash_key__(self))


def _frozen(self: Any, name: str) -> bool:
    # As the generated pair decides: every attribute of the frozen class itself, and the
    # fields of a subclass that does not redefine assignment.
    cls = type(self)
    return cls.__dict__.get("__setattr__") is _frozen_setattr or name in cls.__frozen_fields__


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    if _frozen(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self: Any, name: str) -> None:
    if _frozen(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)
