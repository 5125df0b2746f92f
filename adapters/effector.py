"""The effector: drives pending intents to their outcomes.

Pending intents come from the chain alone (an intent with no outcome in the
chain). For each, the effector observes the world through an adapter, then,
inside the ledger's write transaction, checks that the intent is still
unresolved, lets the domain decide the outcome and appends it: two effectors
racing over one intent leave exactly one outcome. Each intent is driven on its
own; one whose outcome stays unknown holds no other back. An unknown is
recorded when the observation changes, or when its back-off has run out, and is
not observed again on its own before then; nothing is redone blindly.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain import run as run_aggregate
from ..domain.aggregate import fold
from ..domain.effects import BranchObservation, Unknown, decide_base_pin, is_resolved, last_unknown, record_unknown
from ..domain.events import Event, RunBasePinRequested
from . import faults
from .clock import Clock
from .git import observe_branch
from .identity import identity_mismatch
from .ledger import Ledger, PendingIntent

__all__ = ["Effector", "IntentResult"]

ALREADY_RESOLVED = "already-resolved"
BACKING_OFF = "backing-off"
STILL_UNKNOWN = "still-unknown"  # observed again inside its back-off: the same reason, nothing recorded


@dataclass(frozen=True)
class IntentResult:
    intent_id: str
    intent_position: int
    outcome: str  # the outcome event's type name, or one of the three words above
    position: int | None
    event: Event | None
    unknown: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class IntentHandler:
    """How one intent type is carried out: fold its stream, observe the world, decide."""

    apply: Callable[[Any, Event, int], Any]
    observe: Callable[[Any], Any]
    decide: Callable[[Any, Any, Any, str], Event | Unknown]


class _AlreadyResolved(Exception):
    pass


class Effector:
    def __init__(self, ledger: Ledger, clock: Clock):
        self.ledger = ledger
        self.clock = clock
        self.handlers: dict[str, IntentHandler] = {
            RunBasePinRequested.type_name(): IntentHandler(run_aggregate.apply, self._observe_base, decide_base_pin),
        }

    def run_pending(self, *, only: Collection[str] | None = None, after: int | None = None,
                    force: bool = False) -> list[IntentResult]:
        """Drive pending intents (only those named, if given), each on its own.

        The search starts at the effector's cursor, or after a given position
        (0: the whole chain). An intent whose last unknown asked to wait
        (retry_at) is skipped unless force.
        """
        results: list[IntentResult] = []
        now = self.clock.now()
        for pending in self.ledger.pending_intents(after=after):
            intent = pending.intent
            if only is not None and intent.intent_id not in only:
                continue
            retry_at = getattr(pending.last_unknown, "retry_at", None)
            if not force and retry_at is not None and now < retry_at:
                results.append(IntentResult(intent.intent_id, pending.position, BACKING_OFF, None, None, True,
                                            pending.last_unknown.reason))
                continue
            results.append(self._drive(pending))
        self.ledger.advance_effector_cursor()
        return results

    def _drive(self, pending: PendingIntent) -> IntentResult:
        intent = pending.intent
        handler = self.handlers[intent.type_name()]
        faults.crash_point("effector:before-observe")
        observation = handler.observe(intent)
        faults.crash_point("effector:after-observe")
        still_unknown: list[str] = []

        def decision(now: str) -> list[Event]:
            history = self.ledger.history(intent.stream)
            if is_resolved(history, intent.intent_id):
                raise _AlreadyResolved
            decided = handler.decide(fold(handler.apply, history), intent, observation, now)
            if not isinstance(decided, Unknown):
                return [decided]
            unknown = record_unknown(intent.stream, history[-1][1].version, intent.intent_id, decided.reason,
                                     last_unknown(history, intent.intent_id), now)
            if unknown is None:
                still_unknown.append(decided.reason)
                return []
            return [unknown]

        try:
            appended = self.ledger.decide(decision, self.clock.now())
        except _AlreadyResolved:
            return IntentResult(intent.intent_id, pending.position, ALREADY_RESOLVED, None, None)
        if not appended:
            return IntentResult(intent.intent_id, pending.position, STILL_UNKNOWN, None, None, True, still_unknown[0])
        faults.crash_point("effector:after-outcome")
        position, outcome = appended[0]
        unknown = outcome.effect_role == "unknown"
        return IntentResult(intent.intent_id, pending.position, outcome.type_name(), position, outcome, unknown,
                            getattr(outcome, "reason", None) if unknown else None)

    # Observation ports -------------------------------------------------------
    def _observe_base(self, intent: RunBasePinRequested) -> BranchObservation:
        repository = Path(intent.repository)
        mismatch = identity_mismatch(repository, self.ledger.repository_id)
        if mismatch:
            return BranchObservation("unreadable", detail=mismatch)
        return observe_branch(repository, intent.target_branch)
