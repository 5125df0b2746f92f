"""A run's time budget: the sum of its active intervals, one rule for the aggregate and the read model.

Both keep the same two numbers: the milliseconds of the intervals already closed,
and when the open interval (if any) began. The clock runs only while the run is
active and at least one docket process supervises it: time spent paused, or with
no supervisor alive (docket not running, or crashed), is not billed.
Every figure is clamped to [0, MAX_SAFE_INT], so no sequence of recorded times
can make it negative or too large to store.
"""

from __future__ import annotations

from .kernel.values import MAX_SAFE_INT, to_ms

__all__ = ["clock", "remaining_ms", "used_ms"]


def used_ms(closed_ms: int, active_since: str | None, now: str) -> int:
    """Milliseconds spent: the closed intervals, plus the open one up to now."""
    open_ms = max(0, to_ms(now) - to_ms(active_since)) if active_since is not None else 0
    return min(MAX_SAFE_INT, closed_ms + open_ms)


def remaining_ms(budget_ms: int | None, used: int) -> int | None:
    """What is left of the budget (None: no budget), never below zero."""
    return None if budget_ms is None else max(0, budget_ms - used)


def clock(closed_ms: int, active_since: str | None, running: bool, at: str, *,
          ended_at: str | None = None) -> tuple[int, str | None]:
    """The two numbers after a change at ``at`` that leaves the clock running or stopped.

    A clock that starts opens its interval at ``at``; one that stops closes it at
    ``at``, or at ``ended_at`` when the last supervisor's last sign of life came
    earlier (a crashed supervisor: the time after it is downtime, not billed).
    """
    if running:
        return closed_ms, active_since or at
    if active_since is None:
        return closed_ms, None
    return used_ms(closed_ms, active_since, at if ended_at is None else min(at, ended_at, key=to_ms)), None
