"""Check runs no docket process runs any more, as the views list them, finished (see checks.settle_checks)."""

from __future__ import annotations

from typing import Any

from ....projections.query import ViewsConnection
from ...world.clock import Clock
from ..kernel.ledger import Ledger

__all__ = ["settle_abandoned_checks"]


def settle_abandoned_checks(ledger: Ledger, clock: Clock, effector: Any, views: ViewsConnection, *,
                            stop_orphans: bool, driving: tuple[str, str] | None = None) -> list[dict[str, str]]:
    """Finish each unfinished check run of the views that nobody runs any more; what was done to each. driving:
    (run id, this host) when the caller drives that run (checks.settle_checks)."""
    from ....projections import checks
    from .checks import settle_checks

    unfinished = [(row["binding_id"], row["check_id"]) for row in checks.unfinished(views)]
    if not unfinished:
        return []
    done = settle_checks(ledger, clock, effector, unfinished, stop_orphans=stop_orphans, driving=driving)
    return [{"check_id": check_id, "done": what} for check_id, what in done]
