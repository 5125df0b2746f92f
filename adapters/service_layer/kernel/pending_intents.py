"""The ledger's intents still pending in its chain, and the effector's cursor over them (a part of the Ledger)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....domain.events import Event
from .ledger_outages import _riding_out
from .stream_cache import PendingScan, StreamCache
from ...world.ledger.store import ChainedSQLiteProcessRecorder, LedgerBusy, decode_event

__all__ = ["EFFECTOR_CURSOR", "PendingIntent", "PendingIntents"]

EFFECTOR_CURSOR = "effector"  # tracking row: every intent at or below it has its outcome (a cursor, not the truth)


@dataclass(frozen=True)
class PendingIntent:
    """An intent in the chain with no outcome in the chain, and its latest uncertain observation."""

    position: int
    intent: Any  # an Event whose effect_role is "intent"
    last_unknown: Any = None  # an IntentOutcomeUnknown event, or None


class PendingIntents:
    """The Ledger's search for pending intents and its effector's cursor; the Ledger brings the rest."""

    if TYPE_CHECKING:  # the Ledger's, which this is a part of
        recorder: ChainedSQLiteProcessRecorder
        streams: StreamCache
        _cursor: Any

        def _busy(self, error: Exception) -> Exception: ...

    @_riding_out
    def pending_intents(self, *, after: int | None = None, only: Collection[str] | None = None
                        ) -> list[PendingIntent]:
        """Intents after a position that have no outcome in the chain, in ledger order (only those named, if given).

        By default the search starts at the effector's cursor, which only says
        where to start looking (every intent at or below it was resolved when it
        was moved); ``after=0`` reads the whole chain, as replay does. Named
        intents this process appended are looked for from where it appended
        them: an intent's outcomes follow it, so nothing before it can matter.
        """
        if self._cursor is not None:
            return self._only(self._pending(self._cursor, self._start(self._cursor, after, only)), only)
        with self.recorder.read_transaction() as c:
            return self._only(self._pending(c, self._start(c, after, only)), only)

    def _start(self, c: Any, after: int | None, only: Collection[str] | None) -> int | None:
        """Where to look for the named intents: from the earliest of them, when this process appended each one and
        the ledger still holds it there; else from after."""
        if after is None or not only:
            return after
        named = list(only)
        found = [self.streams.intent_position(intent_id) for intent_id in named]
        positions = [p for p in found if p is not None and p > after]
        if len(positions) < len(found):
            return after
        for intent_id, position in zip(named, positions):
            if self.recorder.intent_id_at(c, position) != intent_id:
                return after
        return min(positions) - 1

    @staticmethod
    def _only(pending: list[PendingIntent], only: Collection[str] | None) -> list[PendingIntent]:
        return pending if only is None else [p for p in pending if p.intent.intent_id in only]

    def _pending(self, c: Any, after: int | None) -> list[PendingIntent]:
        from ....domain.effects import INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES  # not on a plain command's path

        if after is None:  # from the cursor: folded on from what this process already scanned
            rows = self._unresolved_since_cursor(c, INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES)
        else:
            rows = self.recorder.select_intent_events(c, after, INTENT_TYPES, OUTCOME_TYPES, UNKNOWN_TYPES)
        intents: dict[str, tuple[int, Event]] = {}
        unknown: dict[str, Event] = {}
        for n in rows:
            event = decode_event(n.originator_id, n.originator_version, n.topic, n.state)
            intent_id = event.intent_id  # type: ignore[attr-defined]
            if event.effect_role == "intent":
                intents[intent_id] = (n.id, event)
            else:  # only unresolved intents and their unknowns come back: no outcome to drop
                unknown[intent_id] = event
        return [PendingIntent(position, intent, unknown.get(intent_id))
                for intent_id, (position, intent) in intents.items()]

    def _unresolved_since_cursor(self, c: Any, intents: Sequence[str], outcomes: Sequence[str],
                                 unknowns: Sequence[str]) -> list[Any]:
        """What select_intent_events(c, cursor, ...) returns, reading only the events after the last scan.

        An intent whose outcome stays unknown holds the effector's cursor back (it is observed again later, and
        holds no other intent back): scanning from the cursor each time would read every intent and outcome
        recorded since, ever more as the run goes on. The process keeps which intents were unresolved as of the
        head it last scanned to, from a start at or below the cursor, and reads only what was appended since; a
        cursor put back (replay) or a head this transaction does not see yet starts the scan afresh.
        """
        cursor = self.recorder.tracked(c, EFFECTOR_CURSOR)
        head = self.recorder.head_position(c)
        types = (*intents, *outcomes, *unknowns)
        outcome_types = set(outcomes)
        with self.streams.pending_lock:
            scan = self.streams.pending_scan
            if scan is None or scan.start > cursor or scan.scanned_to > head:
                scan = PendingScan(cursor, cursor, {})
            unresolved = {intent_id: [p for p in ps if p > cursor] for intent_id, ps in scan.unresolved.items()}
            for position, topic, intent_id in self.recorder.intent_rows(c, scan.scanned_to, head, types):
                if topic in outcome_types:
                    unresolved.pop(intent_id, None)
                else:
                    unresolved.setdefault(intent_id, []).append(position)
            unresolved = {intent_id: ps for intent_id, ps in unresolved.items() if ps}
            self.streams.pending_scan = PendingScan(cursor, head, unresolved)
        return self.recorder.notifications_at(c, sorted(p for ps in unresolved.values() for p in ps))

    @_riding_out
    def effector_cursor(self) -> int:
        with self.recorder.read_transaction() as c:
            return self.recorder.tracked(c, EFFECTOR_CURSOR)

    @_riding_out
    def advance_effector_cursor(self) -> int:
        """Move the cursor up to just below the first pending intent (or to the head); returns it."""
        try:
            with self.recorder.write_transaction() as c:
                current = self.recorder.tracked(c, EFFECTOR_CURSOR)
                pending = self._pending(c, None)
                target = pending[0].position - 1 if pending else self.recorder.head_position(c)
                if target > current:
                    self.recorder.set_tracking(c, EFFECTOR_CURSOR, target)
                return max(target, current)
        except LedgerBusy as e:
            raise self._busy(e) from None

    def rewind_effector_cursor(self, position: int) -> None:
        """Put the cursor back (replay found it past an intent that is still pending)."""
        try:
            with self.recorder.write_transaction() as c:
                self.recorder.set_tracking(c, EFFECTOR_CURSOR, position)
        except LedgerBusy as e:
            raise self._busy(e) from None
