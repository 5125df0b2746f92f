"""A run's supervisions: which docket processes supervise its work now, so that its budget's clock runs.

A supervision begins (RunSupervised) before a launch makes the worktree and ends
(RunUnsupervised) when its supervisor is done. One whose process was killed is
ended by reconcile (``reconciliation``) at its last sign of life: the latest lease grant or renewal
of the workers it supervised (every 20 s), so the downtime after is not billed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ....domain import run as run_aggregate
from ....domain.kernel.errors import Refused
from ...world.clock import Clock, new_id
from ..kernel.ledger import Ledger
from .runs import load_run

if TYPE_CHECKING:
    from ....domain import events as ev
    from ..kernel.ports import ProcessPort

__all__ = ["begin_supervision", "end_supervision"]


def begin_supervision(ledger: Ledger, clock: Clock, processes: ProcessPort, run_ids: set[str]) -> dict[str, str]:
    """Record that this process supervises each run (RunSupervised): their budgets' clocks run while it does."""
    me = processes.identity(os.getpid())
    assert me is not None  # this process runs
    started: dict[str, str] = {}
    for run_id in sorted(run_ids):
        supervision_id = new_id("supervision")

        def decision(now: str, run_id: str = run_id, supervision_id: str = supervision_id) -> ev.Event:
            return run_aggregate.supervised(load_run(ledger, run_id), supervision_id, me, now)

        try:
            ledger.decide(decision, clock.now())
        except Refused:
            continue  # a run closed meanwhile: nothing to bill
        started[run_id] = supervision_id
    return started


def end_supervision(ledger: Ledger, clock: Clock, supervisions: dict[str, str]) -> None:
    for run_id, supervision_id in supervisions.items():
        def decision(now: str, run_id: str = run_id, supervision_id: str = supervision_id) -> list[ev.Event]:
            return run_aggregate.unsupervised(load_run(ledger, run_id), supervision_id, now)

        ledger.decide(decision, clock.now())
