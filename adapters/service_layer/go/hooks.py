"""docket.toml's [hooks] as `docket go` fires them: for the run's new events about once a second, and once at the
end. A hook never stops the run: what it did is in the ledger, and what went wrong is told to ``warn``."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from .session import RunDriver
from .settings import GoSettings

__all__ = ["RunHooks"]

FIRE_SECONDS = 1.0


class RunHooks:
    def __init__(self, d: RunDriver, hooks: Mapping[str, Any], settings: GoSettings, run_id: str, *,
                 warn: Callable[[str, str], None]):
        self.d, self.hooks, self.settings, self.run_id, self.warn = d, hooks, settings, run_id, warn
        self.after, self.due = 0, 0.0

    def fire(self, *, final: bool = False) -> None:
        """Fire the hooks for the run's events since the last time, unless that was less than a second ago (final:
        in any case)."""
        if self.hooks and (final or time.monotonic() >= self.due):
            self.due = time.monotonic() + FIRE_SECONDS
            self._fire()

    def _fire(self) -> None:
        from ....domain.kernel.errors import DocketError
        from ..use_cases.hooks import fire_hooks

        s = self.settings
        try:
            fired = fire_hooks(self.d.ledger, self.d.clock, self.d.effector, self.hooks, self.run_id,
                               docket_dir=s.docket_dir, ledger_path=s.ledger_path,
                               repository=s.main_checkout or s.repository, after=self.after,
                               sandbox=s.agent.confinement.mode)
        except DocketError as e:  # a hook never stops the run; what it did is in the ledger
            self.warn(e.code, f"hooks: {e.message}")
            return
        self.after = fired.examined
        for outcome in fired.outcomes:  # recorded; the user is told too, or a mistyped command goes unnoticed
            if outcome.result == "not-started":
                why = outcome.message or outcome.tail or "no reason given"
                self.warn("hook-not-started", f"hook {outcome.hook} (for the event at position {outcome.position}) "
                                              f"could not start: {why}")
