"""What a command recorded, and the one way the simple use cases record it.

Each decision reads its aggregates inside Ledger.decide, that is inside the
ledger's write transaction, and is given the ledger's time (never earlier than
the last recorded event): what it read cannot change before it is appended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....domain.events import Event
from ...world.clock import Clock
from .ledger import Ledger

__all__ = ["Appended", "record"]


@dataclass(frozen=True)
class Appended:
    """What a command recorded: each event with its ledger position."""

    events: list[tuple[int, Event]]

    @property
    def last(self) -> tuple[int, Event]:
        return self.events[-1]


def record(ledger: Ledger, clock: Clock, decision: Callable[[str], Event | list[Event]]) -> Appended:
    """Append what the decision returns, given the ledger's time, inside the ledger's write transaction."""
    return Appended(ledger.decide(decision, clock.now()))
