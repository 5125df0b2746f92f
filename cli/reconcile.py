"""docket reconcile: the ledger's workers against this machine's processes; --apply converges them."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from .context import Context
from .output import emit, shown
from .parsing import command

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "reconcile", reconcile, common,
                "report workers whose process is gone or unsupervised, processes the ledger does not know, and "
                "supervisions of runs whose docket process is gone",
                "docket reconcile --apply --json")
    p.add_argument("--apply", action="store_true",
                   help="record gone processes as exited, stop unsupervised and unknown ones, end gone "
                        "supervisions at their last sign of life")


def reconcile(ctx: Context) -> int:
    from ..adapters.app.supervision import reconcile_supervisions
    from ..adapters.app.workers import reconcile_workers
    from ..projections import runs, workers
    from ..projections.workers import active_workers

    a = ctx.args
    if a.apply:  # pending launches and stops first: an abandoned launch is resolved, a stop finished
        ctx.effector.run_pending(after=0)
    conn = ctx.views(writable=True).conn
    running = [w["worker_id"] for w in active_workers(conn)]
    findings = reconcile_workers(ctx.ledger, ctx.clock, ctx.effector, running, ctx.paths.ledger, apply=a.apply)
    open_runs = [r["run_id"] for r in runs.list_runs(conn) if r["status"] in ("active", "paused")]
    findings += reconcile_supervisions(ctx.ledger, ctx.clock, ctx.effector.ports.processes, open_runs,
                                       lambda run_id: [w["worker_id"] for w in workers.workers_of(conn, run_id)],
                                       apply=a.apply)
    ctx.update_views()
    lines = [f"{len(findings)} finding(s)" + ("" if a.apply or not findings else "; --apply converges them")]
    for f in findings:
        who = f"worker {shown(f.worker_id)} generation {f.generation}" if f.worker_id else "a process"
        lines.append(f"  {f.kind}: {who}, pid {f.pid}: {shown(f.detail)}"
                     + (f" -> {f.applied}" if f.applied else ""))
    emit(ctx.json, {"applied": a.apply, "findings": [asdict(f) for f in findings]}, "\n".join(lines))
    return 0
