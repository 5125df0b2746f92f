"""Aggregate state as plain JSON values and back: what a snapshot stores.

Aggregates are frozen dataclasses of strings (or literals), integers, booleans,
None, tuples of dataclasses and frozensets of strings. ``to_value`` turns one into
canonical-JSON types (a frozenset becomes a sorted list); ``from_value`` builds
it back from its type hints and refuses anything of the wrong shape with
``SnapshotError``, so a damaged snapshot is never mistaken for state.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

__all__ = ["SnapshotError", "from_value", "to_value"]


class SnapshotError(ValueError):
    """A stored snapshot that does not have the shape of the aggregate's state."""


def to_value(state: Any) -> Any:
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: to_value(getattr(state, f.name)) for f in dataclasses.fields(state)}
    if isinstance(state, (tuple, list)):
        return [to_value(item) for item in state]
    if isinstance(state, frozenset):
        return sorted(to_value(item) for item in state)
    if state is None or isinstance(state, (str, int)):
        return state
    raise SnapshotError(f"{type(state).__name__} has no snapshot form")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_value(kind: Any, value: Any) -> Any:
    """The value of type ``kind`` that ``to_value`` turned into ``value``."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return from_value(inner, value)
    if origin is typing.Literal:
        if not any(value == a and type(value) is type(a) for a in args):
            raise SnapshotError(f"{value!r} is not one of {list(args)}")
        return value
    if origin is tuple:
        _expect(value, list)
        return tuple(from_value(args[0], item) for item in value)
    if origin is frozenset:
        _expect(value, list)
        return frozenset(from_value(args[0], item) for item in value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        _expect(value, dict)
        hints = _hints(kind)
        names = [f.name for f in dataclasses.fields(kind)]
        if set(value) != set(names):
            raise SnapshotError(f"{kind.__name__} fields differ: {sorted(set(value) ^ set(names))}")
        return kind(**{name: from_value(hints[name], value[name]) for name in names})
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SnapshotError(f"{value!r} is not an integer")
        return value
    if kind is bool or kind is str:
        _expect(value, kind)
        return value
    raise SnapshotError(f"no snapshot form for {kind!r}")


def _expect(value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise SnapshotError(f"{value!r} is not a {kind.__name__}")
