"""The ledger application: eventsourcing's Application over the chained store.

Thin: append events (optionally with a tracking position, in the same
transaction), read a stream back with each event's ledger position, and retry
a decision once when another writer won the race for a stream version.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.utils import Environment

from ..domain import ledger as ledger_aggregate
from ..domain.aggregate import fold
from ..domain.errors import Conflict, NotFound
from ..domain.events import Event, LedgerCreated
from .files import create_private_file
from .store import CanonicalMapper, ChainedSQLiteFactory, ChainedSQLiteProcessRecorder, decode_event

__all__ = ["Ledger"]

S = TypeVar("S")


class Ledger(Application):
    name = "docket"

    def __init__(self, path: Path):
        self.path = path
        create_private_file(path)
        super().__init__(
            env={
                "SQLITE_DBNAME": str(path),
                "SQLITE_LOCK_TIMEOUT": "60",
                "ORIGINATOR_ID_TYPE": "text",
            }
        )
        self.recorder: ChainedSQLiteProcessRecorder

    # Configuration is built here, explicitly; os.environ is not consulted.
    def construct_env(self, name: str, env: Any = None) -> Environment:
        return Environment(name, dict(env or {}))

    def construct_factory(self, env: Environment) -> ChainedSQLiteFactory:
        return ChainedSQLiteFactory(env)

    def construct_mapper(self) -> CanonicalMapper:
        return CanonicalMapper()

    def construct_recorder(self) -> ChainedSQLiteProcessRecorder:
        return self.factory.process_recorder()

    # Use-case helpers.
    def append(self, events: Sequence[Event], tracking: Tracking | None = None) -> list[int]:
        """Store events in one transaction; returns their ledger positions."""
        recordings = self.events.put(list(events), tracking=tracking)
        return [r.notification.id for r in recordings]

    def history(self, stream: str) -> list[tuple[int, Event]]:
        return [
            (n.id, decode_event(stream, n.originator_version, n.topic, n.state))
            for n in self.recorder.select_stream(stream)
        ]

    def get(self, apply: Callable[[S | None, Event, int], S], stream: str) -> S | None:
        """The aggregate of stream, or None if the stream has no events."""
        return fold(apply, self.history(stream))

    def head(self) -> int:
        return self.recorder.max_notification_id() or 0

    def decide(self, decision: Callable[[], Event | Sequence[Event]]) -> list[tuple[int, Event]]:
        """Run decision (which reads fresh state) and append what it returns.

        If another writer took a stream version first, decide again on the new
        state once; a second collision is reported as a conflict. Returns each
        appended event with its ledger position.
        """
        for attempt in (1, 2):
            decided = decision()
            events = [decided] if isinstance(decided, Event) else list(decided)
            try:
                return list(zip(self.append(events), events))
            except IntegrityError:
                if attempt == 2:
                    raise Conflict("concurrent-update", "another writer changed the same record; try again") from None
        raise AssertionError("unreachable")

    def is_initialised(self) -> bool:
        first = self.recorder.select_notifications(start=1, limit=1)
        return bool(first) and first[0].topic == LedgerCreated.type_name()

    def require_initialised(self) -> None:
        if not self.is_initialised():
            raise NotFound("no-ledger", f"no docket ledger at {self.path}; run 'docket init' first")

    def initialise(self, now: str) -> bool:
        """Append LedgerCreated at position 1 unless it is there; True if created now."""
        if self.is_initialised():
            return False
        if self.head() != 0:
            raise NotFound("no-ledger", f"{self.path} holds events but no LedgerCreated at position 1")
        try:
            self.append([ledger_aggregate.create(now)])
        except IntegrityError:
            return False  # another `docket init` won the race
        return True
