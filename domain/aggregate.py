"""What every aggregate shares: folding its stream, and making its next event.

An aggregate is a frozen dataclass rebuilt by folding the events of its stream
(each with its ledger position). Decision functions check named invariants,
raise a specific error, and return new events; they never change state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .events import Event

__all__ = ["fold", "next_event"]

S = TypeVar("S")


def fold(
    apply: Callable[[S | None, Event, int], S | None],
    history: Iterable[tuple[int, Event]],
    state: S | None = None,
) -> S | None:
    """Fold (position, event) pairs of one stream into the aggregate's state."""
    for position, event in history:
        state = apply(state, event, position)
    return state


E = TypeVar("E", bound=Event)


def next_event(cls: type[E], stream: str, version: int, now: str, **payload: Any) -> E:
    """The event that would follow ``version`` (0 for a new stream) in ``stream``."""
    return cls(stream=stream, version=version + 1, recorded_at=now, **payload)
