"""A run's time budget: the sum of its active intervals, one rule for the aggregate and the read model.

Both keep the same two numbers: the milliseconds of the intervals already closed,
and when the open interval (if any) began. Time spent paused is not billed.
Every figure is clamped to [0, MAX_SAFE_INT], so no sequence of recorded times
can make it negative or too large to store.
"""

from __future__ import annotations

from .values import MAX_SAFE_INT, to_ms

__all__ = ["remaining_ms", "used_ms"]


def used_ms(closed_ms: int, active_since: str | None, now: str) -> int:
    """Milliseconds spent: the closed intervals, plus the open one up to now."""
    open_ms = max(0, to_ms(now) - to_ms(active_since)) if active_since is not None else 0
    return min(MAX_SAFE_INT, closed_ms + open_ms)


def remaining_ms(budget_ms: int | None, used: int) -> int | None:
    """What is left of the budget (None: no budget), never below zero."""
    return None if budget_ms is None else max(0, budget_ms - used)
