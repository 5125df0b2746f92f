"""A run's supervisions: which docket processes supervise its work now, so that its budget's clock runs.

A supervision begins (RunSupervised) before a launch makes the worktree and ends
(RunUnsupervised) when its supervisor is done. One whose process was killed is
ended by reconcile at its last sign of life: the latest lease grant or renewal
of the workers it supervised (every 20 s), so the downtime after is not billed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...domain import lease as lease_aggregate
from ...domain import run as run_aggregate
from ...domain import worker as worker_aggregate
from ...domain.errors import Refused
from ...domain.values import to_ms
from ..world.clock import Clock, new_id
from .leases import worktree_resource
from .ledger import Ledger
from .runs import load_run
from .workers import Finding, applied

__all__ = ["begin_supervision", "end_supervision", "reconcile_supervisions"]


def begin_supervision(ledger: Ledger, clock: Clock, processes: Any, run_ids: set[str]) -> dict[str, str]:
    """Record that this process supervises each run (RunSupervised): their budgets' clocks run while it does."""
    me = processes.identity(os.getpid())
    started: dict[str, str] = {}
    for run_id in sorted(run_ids):
        supervision_id = new_id("supervision")

        def decision(now: str, run_id: str = run_id, supervision_id: str = supervision_id) -> Any:
            return run_aggregate.supervised(load_run(ledger, run_id), supervision_id, me, now)

        try:
            ledger.decide(decision, clock.now())
        except Refused:
            continue  # a run closed meanwhile: nothing to bill
        started[run_id] = supervision_id
    return started


def end_supervision(ledger: Ledger, clock: Clock, supervisions: dict[str, str]) -> None:
    for run_id, supervision_id in supervisions.items():
        ledger.decide(lambda now, r=run_id, s=supervision_id: run_aggregate.unsupervised(load_run(ledger, r), s, now),
                      clock.now())


def reconcile_supervisions(ledger: Ledger, clock: Clock, processes: Any, runs: Sequence[str],
                           workers_of: Callable[[str], Iterable[str]], *, apply: bool) -> list[Finding]:
    """Supervisions of open runs whose docket process is positively gone: with apply, ended at its last sign of
    life (its last lease grant or renewal), so the time since is not billed. ``workers_of(run_id)`` lists the
    run's worker ids."""
    findings: list[Finding] = []
    for run_id in runs:
        run = load_run(ledger, run_id)
        for supervision in run.supervisions:
            if processes.liveness(supervision.supervisor) != "dead":
                continue
            seen = [supervision.since]
            for worker_id in workers_of(run_id):
                worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(worker_id))
                if worker is None or worker.supervisor != supervision.supervisor or worker.task_id is None:
                    continue
                lease = ledger.get(lease_aggregate.apply,
                                   lease_aggregate.stream_of(worktree_resource(run_id, worker.task_id)))
                if lease is not None and lease.renewed_at is not None:
                    seen.append(lease.renewed_at)
            last_seen = max(seen, key=to_ms)
            finding = Finding("supervisor-gone", None, None, supervision.supervisor.pid,
                              f"run {run_id}: supervision {supervision.supervision_id} last seen at {last_seen}")
            if apply:
                ledger.decide(lambda now, s=supervision.supervision_id, r=run_id: run_aggregate.unsupervised(
                    load_run(ledger, r), s, now, last_seen=last_seen), clock.now())
                finding = applied(finding, "ended there: the time since is not billed")
            findings.append(finding)
    return findings
