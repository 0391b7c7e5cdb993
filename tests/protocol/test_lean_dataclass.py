"""The shared-method dataclass decorator behaves as `dataclasses.dataclass` does.

Each case builds the same class body twice, once under each decorator, and compares what a
caller can see: equality (with other instances, other classes and non-compared fields),
hashability and hash agreement, repr, frozen assignment and deletion, `replace`, copying,
pickling and pattern matching.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from minicoord.protocol.lean_dataclass import dataclass as lean

OPTIONS = [
    {},
    {"slots": True},
    {"frozen": True},
    {"frozen": True, "slots": True},
    {"eq": False},
    {"eq": False, "slots": True},
    {"repr": False, "slots": True},
    {"frozen": True, "eq": False},
]


def _body() -> dict[str, Any]:
    return {
        "__annotations__": {"a": "int", "b": "str", "c": "list[int]", "d": "float"},
        "b": "x",
        "c": dataclasses.field(default_factory=list, compare=False, repr=False),
        "d": 0.0,
    }


def _pair(options: dict[str, Any], name: str = "Point") -> tuple[type, type]:
    made = []
    for decorate in (dataclasses.dataclass, lean):
        cls = type(name, (), {**_body(), "__module__": __name__, "__qualname__": name})
        made.append(decorate(**options)(cls))
    return made[0], made[1]


# Pickling finds classes by module and qualified name.
StdFrozen, LeanFrozen = _pair({"frozen": True, "slots": True}, "Frozen")
StdFrozen.__qualname__ = StdFrozen.__name__ = "StdFrozen"
LeanFrozen.__qualname__ = LeanFrozen.__name__ = "LeanFrozen"


def _outcome(action: Any) -> Any:
    try:
        return ("ok", action())
    except Exception as exc:  # the exception's type is what is compared
        return ("raised", type(exc))


def _seen(cls: type, args: tuple[Any, ...], other: tuple[Any, ...]) -> dict[str, Any]:
    one, same, two = cls(*args), cls(*args), cls(*other)
    same_but_c = cls(*args[:2], [99], *args[3:])

    def assign() -> None:
        one.a = 5

    def delete() -> None:
        del same.b

    def assign_new() -> None:
        one.zz = 1

    return {
        "equal": one == same,
        "differ": one == two,
        "not compared": one == same_but_c,
        "other type": one == args,
        "not equal": one != same,
        "hash": _outcome(lambda: hash(one) == hash(same)),
        "hash of fields": _outcome(lambda: hash(one) == hash((one.a, one.b, one.d))),
        "repr": re.sub(" at 0x[0-9a-f]+", "", repr(one)),
        "assign": _outcome(assign),
        "delete": _outcome(delete),
        # Whether it is refused, not with what: Python 3.11's own frozen slots classes refuse
        # a new attribute with a TypeError from a `super()` call that names the class before
        # its slots were added (fixed in 3.12); the shared method raises FrozenInstanceError.
        "assign new": _outcome(assign_new)[0],
        "replace": dataclasses.replace(cls(*args), a=7).a,
        "copy": _outcome(lambda: copy.copy(two) == two),
        "astuple": dataclasses.astuple(two),
        "match args": cls.__match_args__,
    }


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
@given(
    args=st.tuples(st.integers(), st.text(max_size=5), st.just([1]), st.floats()),
    other=st.tuples(st.integers(), st.text(max_size=5), st.just([2]), st.floats()),
)
def test_behaves_as_the_standard_decorator(
    options: dict[str, Any], args: tuple[Any, ...], other: tuple[Any, ...]
) -> None:
    std, lean_cls = _pair(options)
    assert _seen(lean_cls, args, other) == _seen(std, args, other)


def test_frozen_instances_pickle_and_deep_copy() -> None:
    for cls in (StdFrozen, LeanFrozen):
        value = cls(1, "y", [3], 2.5)
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value


def test_a_nan_field_equals_itself_as_in_a_tuple() -> None:
    nan = float("nan")
    for options in ({}, {"frozen": True}):
        std, lean_cls = _pair(options)
        assert (lean_cls(1, "x", [], nan) == lean_cls(1, "x", [], nan)) == (
            std(1, "x", [], nan) == std(1, "x", [], nan)
        )


def test_own_methods_and_explicit_hash_are_kept() -> None:
    @lean(frozen=True)
    class Own:
        a: int

        def __repr__(self) -> str:
            return "mine"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "mine"
    assert Own(1) == Own(2)
    assert hash(Own(1)) == 7


def test_subclass_of_a_frozen_class_may_set_its_own_attributes() -> None:
    for decorate in (dataclasses.dataclass, lean):

        @decorate(frozen=True)
        class Base:
            a: int

        class Extra(Base):
            pass

        extra = Extra(1)
        extra.note = "fine"  # not a field: allowed, as the standard pair allows it
        assert extra.note == "fine"
        with pytest.raises(dataclasses.FrozenInstanceError):
            extra.a = 2


def test_a_recursive_value_reprs_with_an_ellipsis() -> None:
    @lean
    class Node:
        child: Any = None

    node = Node()
    node.child = node
    assert repr(node) == "test_a_recursive_value_reprs_with_an_ellipsis.<locals>.Node(child=...)"


def test_order_and_unsafe_hash_are_refused() -> None:
    for option in ("order", "unsafe_hash"):
        with pytest.raises(TypeError):
            lean(**{option: True})(type("C", (), {"__annotations__": {"a": "int"}}))


@pytest.mark.parametrize("fields", [0, 1, 2])
def test_classes_of_zero_one_and_two_fields_compare_and_hash_as_the_standard(fields: int) -> None:
    # The key getter differs by count (a tuple built for one field, an empty one for none).
    names = ["a", "b"][:fields]
    made = []
    for decorate in (dataclasses.dataclass, lean):
        body = {"__annotations__": {n: "int" for n in names}, "__module__": __name__}
        made.append(decorate(frozen=True, slots=True)(type("Small", (), body)))
    std, lean_cls = made
    values = list(range(fields))
    for cls in (std, lean_cls):
        one, same, other = cls(*values), cls(*values), cls(*[v + 1 for v in values])
        assert one == same and hash(one) == hash(same) == hash(tuple(values))
        assert (one == other) == (fields == 0)
        assert {one: 1}[same] == 1
    assert repr(lean_cls(*values)) == repr(std(*values))
