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
                "report workers whose process is gone or unsupervised, and processes the ledger does not know",
                "docket reconcile --apply --json")
    p.add_argument("--apply", action="store_true",
                   help="record gone processes as exited, stop unsupervised and unknown ones")


def reconcile(ctx: Context) -> int:
    from ..adapters.app.workers import reconcile_workers
    from ..projections.workers import active_workers

    a = ctx.args
    if a.apply:  # pending launches and stops first: an abandoned launch is resolved, a stop finished
        ctx.effector.run_pending(after=0)
    running = [w["worker_id"] for w in active_workers(ctx.views(writable=True).conn)]
    findings = reconcile_workers(ctx.ledger, ctx.clock, ctx.effector, running, ctx.paths.ledger, apply=a.apply)
    ctx.update_views()
    lines = [f"{len(findings)} finding(s)" + ("" if a.apply or not findings else "; --apply converges them")]
    for f in findings:
        who = f"worker {shown(f.worker_id)} generation {f.generation}" if f.worker_id else "a process"
        lines.append(f"  {f.kind}: {who}, pid {f.pid}: {shown(f.detail)}"
                     + (f" -> {f.applied}" if f.applied else ""))
    emit(ctx.json, {"applied": a.apply, "findings": [asdict(f) for f in findings]}, "\n".join(lines))
    return 0
