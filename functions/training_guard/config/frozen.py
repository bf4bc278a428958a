"""`frozen`: `@dataclass(frozen=True)` made without `exec`, for the classes every cold start creates.

A frozen dataclass compiles six methods at import (~0.45 ms a class, measured; ~50 classes were ~0.15x of a bare
`import boto3`); `frozen` gives the same fields to `dataclasses` and makes the methods as closures, in ~0.05 ms."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")
_MADE = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__post_init__")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: type[_T]) -> type[_T]:
    """A frozen dataclass, as `@dataclass(frozen=True)` makes it (fields, asdict and replace work), without exec."""
    if written := [name for name in _MADE if name in vars(cls)]:
        raise TypeError(f"{cls.__qualname__} writes {', '.join(written)}: use @dataclass(frozen=True)")
    if not vars(cls).get("__doc__"):  # dataclass would write `Name(signature)` with inspect: ~50 µs more
        cls.__doc__ = f"{cls.__name__}({', '.join(vars(cls).get('__annotations__', {}))})"
    dataclass(init=False, repr=False, eq=False)(cls)  # the fields, their defaults and __match_args__, no method
    own = fields(cls)  # type: ignore[arg-type]  # a dataclass now
    if odd := [f.name for f in own if not (f.init and f.repr and f.compare) or f.hash is not None or f.kw_only]:
        raise TypeError(f"{cls.__qualname__}: field options `frozen` does not make ({', '.join(odd)})")
    names = tuple(f.name for f in own)
    for method in _methods(cls, names, tuple((f.name, f.default, f.default_factory) for f in own)):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
    return cls


def _methods(
    owner: type[Any], names: tuple[str, ...], defaults: tuple[tuple[str, Any, Any], ...]
) -> tuple[Callable[..., Any], ...]:
    known = frozenset(names)
    values = _values(names)
    setter = object.__setattr__

    def __init__(self: Any, /, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > len(names):
                raise TypeError(f"{owner.__qualname__}() takes {len(names)} arguments but {len(args)} were given")
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{owner.__qualname__}() got multiple values for argument {name!r}")
                kwargs[name] = value
        if not kwargs.keys() <= known:
            raise TypeError(f"{owner.__qualname__}() got an unexpected keyword argument {min(kwargs.keys() - known)!r}")
        state, missing = {}, []
        for name, default, factory in defaults:
            value = kwargs.get(name, default)
            if value is MISSING and name not in kwargs:
                if factory is MISSING:
                    missing.append(repr(name))
                    continue
                value = factory()
            state[name] = value
        if missing:
            raise TypeError(f"{owner.__qualname__}() missing required argument(s): {', '.join(missing)}")
        setter(self, "__dict__", state)  # in field order, as dataclass's __init__ leaves it; one call, not one a field

    @recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(names, values(self), strict=True))
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(values(self) == values(other))
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(values(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name in known or self.__class__ is owner:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(owner, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if name in known or self.__class__ is owner:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(owner, self).__delattr__(name)

    return __init__, __repr__, __eq__, __hash__, __setattr__, __delattr__


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """An instance's field values as a tuple, in field order (what dataclasses compare and hash)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda _instance: ()
