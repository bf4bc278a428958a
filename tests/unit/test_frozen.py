"""`frozen` behaves as `@dataclass(frozen=True)` does, side by side on the same class body, without its `exec`."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from collections.abc import Callable
from dataclasses import FrozenInstanceError, asdict, field, fields, replace
from typing import Any

import pytest

from training_guard.config.frozen import frozen


@frozen
class Point:
    """A point with a default, a default factory and a nested frozen class."""

    x: int
    y: int = 0
    tags: dict[str, str] = field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class PointDataclass:
    """The same body as a frozen dataclass."""

    x: int
    y: int = 0
    tags: dict[str, str] = field(default_factory=dict)


@frozen
class Line:
    start: Point
    end: Point | None = None


@frozen
class Pair:
    number: int
    text: str


@dataclasses.dataclass(frozen=True)
class PairDataclass:
    number: int
    text: str


@frozen
class Nothing:
    pass


@frozen
class Boxed:
    items: list[object]


def same(make: Callable[[type], Any]) -> tuple[Any, Any]:
    return make(Point), make(PointDataclass)


def test_construction_defaults_factories_and_order_are_the_dataclasses() -> None:
    mine, theirs = same(lambda cls: cls(1, tags={"a": "b"}))
    assert [(f.name, f.default, f.default_factory) for f in fields(mine)] == [
        (f.name, f.default, f.default_factory) for f in fields(theirs)
    ]
    assert (mine.x, mine.y, mine.tags) == (theirs.x, theirs.y, theirs.tags) == (1, 0, {"a": "b"})
    assert Point(1).tags is not Point(1).tags  # a fresh default per instance
    # the instance's attributes in field order, whatever the order of the arguments
    assert list(vars(Point(tags={}, x=1))) == list(vars(PointDataclass(tags={}, x=1))) == ["x", "y", "tags"]
    assert Point(y=2, x=1) == Point(1, 2)
    assert Point.__match_args__ == PointDataclass.__match_args__ == ("x", "y", "tags")
    assert Point.y == 0  # the default stays a class attribute, as dataclasses leave it


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing required argument(s): 'x'"),
        ((1, 2, {}, 4), {}, "takes 3 arguments but 4 were given"),
        ((1,), {"x": 2}, "got multiple values for argument 'x'"),
        ((1,), {"z": 2}, "got an unexpected keyword argument 'z'"),
    ],
)
def test_wrong_arguments_raise_a_type_error_as_the_dataclass_does(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError):
        PointDataclass(*args, **kwargs)
    with pytest.raises(TypeError, match="^" + re.escape(f"Point() {message}") + "$"):
        Point(*args, **kwargs)


def test_repr_is_the_dataclasses_and_survives_a_cycle() -> None:
    mine, theirs = same(lambda cls: cls(1, 2, {"k": "v"}))
    assert repr(mine) == repr(theirs).replace("PointDataclass", "Point") == "Point(x=1, y=2, tags={'k': 'v'})"
    assert repr(Line(Point(1))) == "Line(start=Point(x=1, y=0, tags={}), end=None)"
    assert repr(Nothing()) == "Nothing()"
    boxed = Boxed([])
    boxed.items.append(boxed)
    assert repr(boxed) == "Boxed(items=[...])"


def test_equality_and_hash_are_by_value_and_class() -> None:
    assert Line(Point(1)) == Line(Point(1))
    assert Line(Point(1)) != Line(Point(2))
    assert Point(1) != PointDataclass(1)  # type: ignore[comparison-overlap]  # what is checked
    assert Point(1).__eq__(object()) is NotImplemented
    assert hash(Pair(1, "a")) == hash(PairDataclass(1, "a")) == hash((1, "a"))
    assert len({Pair(1, "a"), Pair(1, "a"), Pair(2, "a")}) == 2
    assert hash(Nothing()) == hash(())
    assert Nothing() == Nothing()
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        hash(Point(1))
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        hash(PointDataclass(1))


def test_fields_cannot_be_assigned_or_deleted() -> None:
    point = Point(1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'other'"):
        point.other = 2  # type: ignore[attr-defined]
    with pytest.raises(FrozenInstanceError, match="cannot delete field 'x'"):
        del point.x
    assert point.x == 1


def test_dataclasses_functions_and_copies_work_on_a_frozen_class() -> None:
    line = Line(Point(1, tags={"a": "b"}), Point(2))
    assert dataclasses.is_dataclass(line)
    assert asdict(line) == {"start": {"x": 1, "y": 0, "tags": {"a": "b"}}, "end": {"x": 2, "y": 0, "tags": {}}}
    moved = replace(line, end=None)
    assert moved == Line(Point(1, tags={"a": "b"}))
    assert line.end == Point(2)
    assert copy.deepcopy(line) == line
    assert pickle.loads(pickle.dumps(line)) == line  # noqa: S301 - our own bytes


def test_docstrings_are_kept_and_a_missing_one_names_the_fields() -> None:
    assert Point.__doc__ == "A point with a default, a default factory and a nested frozen class."
    assert Line.__doc__ == "Line(start, end)"  # starts with `Line(`, as a dataclass's own (config_docs skips both)


def test_a_class_that_writes_what_a_record_makes_is_refused() -> None:
    with pytest.raises(TypeError, match="writes __repr__: use @dataclass"):

        @frozen
        class Shown:
            x: int

            def __repr__(self) -> str:
                return "x"

    with pytest.raises(TypeError, match=r"field options `frozen` does not make \(x\)"):

        @frozen
        class Hidden:
            x: int = field(repr=False)
