"""The effector: drives pending intents to their outcomes.

Pending intents come from the chain alone (an intent with no outcome in the
chain). Each is driven by its kind (``adapters/intents.py``): the effector
observes the world through the kind's port, then, inside the ledger's write
transaction, checks that the intent is still unresolved, lets the domain decide
the outcome and appends it: two effectors racing over one intent leave exactly
one outcome. Only when the decision is ``Act`` does it carry the effect out,
observe again and decide once more. Each intent is driven on its own; one whose
outcome stays unknown holds no other back. An unknown is recorded when the
observation changes, or when its back-off has run out, and is not observed
again on its own before then; nothing is redone blindly.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ....domain.effects import Act, Unknown, is_resolved, last_unknown, record_unknown
from ....domain.events import Event
from ...world import faults
from ...world.clock import Clock
from .intents import INTENT_KINDS, IntentKind
from .ledger import Ledger, PendingIntent
from .ports import IntentResult, PortSet, real_ports

__all__ = ["Effector", "IntentResult"]

ALREADY_RESOLVED = "already-resolved"
BACKING_OFF = "backing-off"
STILL_UNKNOWN = "still-unknown"  # observed again inside its back-off: the same reason, nothing recorded


class _AlreadyResolved(Exception):
    pass


class _Act(Exception):
    pass


class Effector:
    def __init__(self, ledger: Ledger, clock: Clock, ports: PortSet | None = None,
                 kinds: Mapping[str, IntentKind[Any, Any, Any]] = INTENT_KINDS, *, home: Path | None = None):
        """home: this host's clone of the ledger's repository (the git common dir), if it has one."""
        self.ledger = ledger
        self.clock = clock
        self.ports: PortSet = ports if ports is not None else real_ports()
        self.kinds = kinds
        self.home = home
        self._local: dict[str, Path] = {}

    def local(self, recorded: str | Path) -> Path:
        """The repository to act on for one the ledger recorded, a path on the machine that recorded it: this host's
        own clone of the ledger's repository (home), when it is one (the ledger is shared by machines, each with its
        own clone: another host's clone is never acted on, even where its path can be reached, as when two hosts
        share a machine); else the recorded path, whose mismatch the ports report."""
        key = str(recorded)
        if key not in self._local:
            wanted = self.ledger.repository_id
            chosen = Path(key)
            if (wanted is not None and self.home is not None and chosen != self.home
                    and self.ports.inventory.identity(self.home) == wanted):
                chosen = self.home
            self._local[key] = chosen
        return self._local[key]

    def run_pending(self, *, only: Collection[str] | None = None, after: int | None = None,
                    force: bool = False) -> list[IntentResult]:
        """Drive pending intents (only those named, if given), each on its own.

        The search starts at the effector's cursor, or after a given position
        (0: the whole chain). An intent whose last unknown asked to wait
        (retry_at) is skipped unless force.
        """
        results: list[IntentResult] = []
        now = self.clock.now()
        for pending in self.ledger.pending_intents(after=after, only=only):
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
        kind = self.kinds[pending.intent.type_name()]
        if kind.shared and self.local(pending.intent.repository) != Path(pending.intent.repository):
            local = pending.intent.model_copy(update={"repository": str(self.local(pending.intent.repository))})
            pending = PendingIntent(pending.position, local, pending.last_unknown)
        port = (getattr(self.ports, kind.port) if isinstance(kind.port, str)
                else tuple(getattr(self.ports, name) for name in kind.port))
        faults.crash_point("effector:before-observe", kind.type_name)
        observation = kind.observe(port, pending.intent, self.ledger.repository_id)
        faults.crash_point("effector:after-observe", kind.type_name)
        try:
            return self._record(kind, pending, observation, acted=False)
        except _Act:
            pass
        if kind.act is None:
            raise TypeError(f"{kind.type_name} decided to act, but its kind declares no act")
        if kind.delivers:
            self.ledger.require_intact()  # LedgerTampered: the target stays where it is
        faults.crash_point("effector:before-act", kind.type_name)
        kind.act(port, pending.intent, observation)
        faults.crash_point("effector:after-act", kind.type_name)
        observation = kind.observe(port, pending.intent, self.ledger.repository_id)
        return self._record(kind, pending, observation, acted=True)

    def _record(self, kind: IntentKind[Any, Any, Any], pending: PendingIntent, observation: Any, *,
                acted: bool) -> IntentResult:
        """Decide on the observation inside the write transaction and append the outcome or unknown.

        Raises _Act, appending nothing, when the world is in the state before the
        effect and it has not been acted on yet in this pass.
        """
        intent = pending.intent
        stream = kind.stream_of(intent)
        still_unknown: list[str] = []

        def decision(now: str) -> list[Event]:
            since = self.ledger.history(stream, after_version=intent.version - 1)  # its outcomes follow it
            if is_resolved(since, intent.intent_id):
                raise _AlreadyResolved
            decided = kind.decide(self.ledger.get(kind.apply, stream), intent, observation, now)
            if isinstance(decided, Act):
                if not acted:
                    raise _Act
                decided = Unknown("the effect was carried out, but the world still shows the state before it")
            if not isinstance(decided, Unknown):
                return [kind.made(decided) if acted and kind.made is not None else decided]
            unknown = record_unknown(stream, since[-1][1].version, intent.intent_id, decided.reason,
                                     last_unknown(since, intent.intent_id), now)
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
        faults.crash_point("effector:after-outcome", kind.type_name)
        position, outcome = appended[0]
        unknown = outcome.effect_role == "unknown"
        return IntentResult(intent.intent_id, pending.position, outcome.type_name(), position, outcome, unknown,
                            getattr(outcome, "reason", None) if unknown else None)
