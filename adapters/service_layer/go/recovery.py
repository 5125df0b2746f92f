"""What a crash left of a `docket go` run, converged before a supervisor drives it again."""

from __future__ import annotations

from ....domain import run as run_aggregate
from .session import RunDriver
from ..use_cases.runs import load_run

__all__ = ["end_gone_supervisions", "finish_opening", "recover"]


def finish_opening(d: RunDriver, run: run_aggregate.Run) -> run_aggregate.Run:
    """A run killed before its base was pinned: pin it now; the run as it then stands."""
    if run.status != "opening":
        return run
    d.effector.run_pending(only=set(run.pending_intents), after=0)
    d.update_views()
    return load_run(d.ledger, run.run_id)


def end_gone_supervisions(d: RunDriver, run_id: str) -> None:
    """End the run's supervisions whose docket process is gone, at their last sign of life."""
    from ....projections import workers
    from ..use_cases.reconciliation import reconcile_supervisions

    conn = d.views(writable=True).conn
    reconcile_supervisions(d.ledger, d.clock, d.effector.ports.processes, [run_id],
                           lambda r: [w["worker_id"] for w in workers.workers_of(conn, r)], apply=True)
    d.update_views()


def recover(d: RunDriver, run_id: str) -> list[str]:
    """What a crash left of the run, converged: its pending intents driven, its workers' processes settled (gone ones
    recorded, unsupervised ones stopped), gone supervisions ended, abandoned check runs finished."""
    from ....projections import workers
    from ..use_cases.abandoned_checks import settle_abandoned_checks
    from ..use_cases.reconciliation import reconcile_supervisions
    from ..use_cases.reconciliation import reconcile_workers

    done = []
    # this run's intents only: another `docket go` beside it drives its own (a launch it recorded and has not
    # started yet would be found with no launcher here, and failed as abandoned)
    mine = {p.intent.intent_id for p in d.ledger.pending_intents(after=0)
            if getattr(p.intent, "run_id", None) == run_id}
    if mine:
        d.effector.run_pending(only=mine, after=0)
    conn = d.views(writable=True).conn
    running = [w["worker_id"] for w in workers.workers_of(conn, run_id) if w["status"] in ("launching", "running")]
    findings = reconcile_workers(d.ledger, d.clock, d.effector, running, d.ledger_path, apply=True)
    findings += reconcile_supervisions(d.ledger, d.clock, d.effector.ports.processes, [run_id],
                                       lambda r: [w["worker_id"] for w in workers.workers_of(conn, r)], apply=True)
    done += [f"{f.kind}: {f.worker_id or 'pid ' + str(f.pid)}: {f.applied}" for f in findings]
    d.update_views()
    here = d.effector.ports.processes.this_host()[0]
    settled = settle_abandoned_checks(d.ledger, d.clock, d.effector, d.views().conn, stop_orphans=True,
                                      driving=(run_id, here))
    done += [f"check {s['check_id']}: {s['done']}" for s in settled]
    d.update_views()
    return done
