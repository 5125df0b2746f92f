"""What a run's agents used, read from the ledger, and the hard stop once it reaches the run's max cost or tokens.

``stop_when_spent`` decides in the ledger's write transaction (the run and every report read there), so
RunUsageExhausted is recorded once however many processes check at the same moment. It is asked right after an
agent's report is recorded (workers.exit_worker), by `docket go`'s main loop and by the supervisor of each agent.
"""

from __future__ import annotations

from typing import Any

from ....domain import events as ev
from ....domain import run as run_aggregate
from ....domain import usage as usage_rules
from ...world.clock import Clock
from ..kernel.ledger import Ledger
from .runs import load_run

__all__ = ["run_usage", "stop_when_spent"]


def _reports(ledger: Ledger) -> list[Any]:
    types = [getattr(ev, name) for name in usage_rules.REPORT_TYPES]
    return [event for _, event in ledger.events_of(*types)]


def run_usage(ledger: Ledger, run_id: str) -> usage_rules.Usage:
    """The run's use as its agents reported it (inside a decision: as its write transaction sees it)."""
    return usage_rules.run_usage(_reports(ledger), run_id)


def stop_when_spent(ledger: Ledger, clock: Clock, run_id: str, *, run: run_aggregate.Run | None = None) -> bool:
    """Record RunUsageExhausted once the run's reported use reaches its max cost or max tokens; whether it was
    recorded now. ``run``: the run as the caller just read it, so a run with no such limit, or closed, or still
    below them, costs no write transaction."""
    run = run or load_run(ledger, run_id)
    if not run.limits_usage or run.status not in ("active", "paused"):
        return False
    if usage_rules.reached(run_usage(ledger, run_id), run.max_cost_micro_usd, run.max_tokens) is None:
        return False

    def decision(now: str) -> list[ev.Event]:
        return run_aggregate.exhaust_usage(load_run(ledger, run_id), run_usage(ledger, run_id), now)

    return bool(ledger.decide(decision, clock.now()))
