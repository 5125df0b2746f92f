"""docket approve: someone approves a run's confirmed candidates for integration ([integration] approval = true)."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import command

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "approve", approve, common,
                "record that NAME approves the run's confirmed candidates (each task's latest; of one task with "
                "--task) for integration; refused once the integration is prepared (exit 3)",
                "docket approve run-7k2m9x4q --by 'Ada Lovelace' --json")
    p.add_argument("run", metavar="RUN", help="the run whose candidates are approved")
    p.add_argument("--task", metavar="TASK", help="approve this task's confirmed candidate only")
    p.add_argument("--by", metavar="NAME", required=True, help="who approves (recorded as given, up to 200 characters)")


def approve(ctx: Context) -> int:
    from ...adapters.service_layer.merge_queue.approval import approve as record_approval
    from ..console.output import emit, shown

    a = ctx.args
    task = None if a.task is None else ctx.task_id(a.run, a.task)
    recorded = record_approval(ctx.ledger, ctx.clock, ctx.views(), a.run, task, a.by)
    ctx.update_views()
    candidates = [c.model_dump() for c in recorded.candidates]
    lines = [f"run {shown(a.run)}: approved by {shown(recorded.by)}"]
    lines += [f"  task {shown(c['task_id'])}: candidate {c['binding_id'][:12]} (commit {c['commit'][:12]})"
              for c in candidates]
    emit(ctx.json, {"run_id": recorded.run_id, "by": recorded.by, "recorded_at": recorded.recorded_at,
                    "candidates": candidates}, "\n".join(lines))
    return 0
