"""The effector: drives pending intents to their outcomes, in ledger order.

For each intent after its tracked position it observes the world through an
adapter, lets the domain decide the outcome, and appends that outcome together
with its own tracking position in one transaction. The tracking row only moves
forward, and the outcome takes the next version of the intent's stream, so two
effectors racing over the same intent leave exactly one outcome. An "unknown"
outcome is appended without moving the tracking position: the next pass
observes again, and nothing is redone blindly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eventsourcing.persistence import IntegrityError, Tracking

from ..domain import run as run_aggregate
from ..domain.effects import INTENT_TYPES, decide_base_pin
from ..domain.errors import Refused
from ..domain.events import Event, IntentOutcomeUnknown, RunBasePinRequested
from . import faults
from .clock import Clock
from .git import observe_branch
from .ledger import Ledger
from .store import decode_event

__all__ = ["Effector", "IntentResult"]

TRACKING_NAME = "effector"


@dataclass(frozen=True)
class IntentResult:
    intent_id: str
    intent_position: int
    outcome: str  # the outcome event's type name, or "already-resolved"
    position: int | None
    event: Event | None
    unknown: bool = False


class Effector:
    def __init__(self, ledger: Ledger, clock: Clock):
        self.ledger = ledger
        self.clock = clock
        self._handlers: dict[str, Callable[[Event], Event]] = {
            RunBasePinRequested.type_name(): self._pin_base,
        }

    def tracked_position(self) -> int:
        return self.ledger.recorder.max_tracking_id(TRACKING_NAME) or 0

    def run_pending(self) -> list[IntentResult]:
        """Drive every pending intent; stop at the first whose outcome is unknown."""
        results: list[IntentResult] = []
        while True:
            batch = self.ledger.recorder.select_notifications(
                start=self.tracked_position(), limit=100, topics=list(INTENT_TYPES), inclusive_of_start=False
            )
            if not batch:
                return results
            for notification in batch:
                intent = decode_event(notification.originator_id, notification.originator_version,
                                      notification.topic, notification.state)
                result = self._drive(notification.id, intent)
                results.append(result)
                if result.unknown:
                    return results

    def _drive(self, position: int, intent: Event) -> IntentResult:
        handler = self._handlers[intent.type_name()]
        for _ in range(2):
            faults.crash_point("effector:before-observe")
            try:
                outcome = handler(intent)
            except Refused as e:
                if e.code != "intent-resolved":
                    raise
                self._skip(position)
                return IntentResult(intent.intent_id, position, "already-resolved", None, None)
            unknown = isinstance(outcome, IntentOutcomeUnknown)
            try:
                (outcome_position,) = self.ledger.append(
                    [outcome], tracking=None if unknown else Tracking(TRACKING_NAME, position)
                )
            except IntegrityError:
                continue  # another effector recorded first: look again
            faults.crash_point("effector:after-outcome")
            return IntentResult(intent.intent_id, position, outcome.type_name(), outcome_position, outcome, unknown)
        self._skip(position)
        return IntentResult(intent.intent_id, position, "already-resolved", None, None)

    def _skip(self, position: int) -> None:
        """The intent's outcome is already in the ledger: move the tracking past it."""
        try:
            self.ledger.recorder.insert_tracking(Tracking(TRACKING_NAME, position))
        except IntegrityError:
            pass  # another effector already moved past it

    def _pin_base(self, intent: Event) -> Event:
        assert isinstance(intent, RunBasePinRequested)
        run = self.ledger.get(run_aggregate.apply, run_aggregate.stream_of(intent.run_id))
        assert run is not None
        if intent.intent_id not in run.pending_intents:
            raise Refused("intent-resolved", intent.intent_id)
        observed = observe_branch(Path(intent.repository), intent.target_branch)
        faults.crash_point("effector:after-observe")
        return decide_base_pin(run, intent, observed, self.clock.now())
