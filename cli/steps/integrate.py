"""docket integrate: merge a run's confirmed candidates into its target branch, a merge queue that survives crashes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..console.context import Context
from ..console.parsing import command

if TYPE_CHECKING:
    from ...adapters.service_layer.merge_queue.integration import Integrated
    from ...domain.merge_queue.integration_state import Integration

__all__ = ["register"]

# Why a stopped integration stopped, as the error code the command exits 3 with.
STOP_CODES = {"conflicted": "step-conflicted", "rejected": "step-rejected", "failed": "integration-ref-moved"}


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "integrate", integrate, common,
                "merge each task's confirmed candidate into the run's target branch, in task order: every step "
                "merged on refs/docket/integrations/RUN and its required checks run again on the merged tree, then "
                "the target moved by compare-and-swap (run again to go on after a crash; exit 3: the queue stopped)",
                "docket integrate r1\n  docket integrate r1 --json")
    p.add_argument("run", metavar="RUN", help="the run's id")


def integrate(ctx: Context) -> int:
    from ...adapters.world.processes.process_tree import become_subreaper

    become_subreaper()  # what the agents, checks and hooks it launches leave is adopted here, and stopped
    from pathlib import Path

    from ...adapters.service_layer.use_cases.checks import CheckSpec
    from ...adapters.service_layer.merge_queue.integration import integrate as run_queue
    from ...adapters.world.files.config_file import load_trusted_config
    from ...domain.kernel.errors import Refused
    from ...projections import candidates, tasks
    from ..console.output import emit, shown

    run_id = ctx.args.run
    config = load_trusted_config(Path.cwd())
    from ...adapters.world.processes.sandbox_roots import require_sandbox
    from ...domain.containment.sandbox import Confinement

    require_sandbox(Confinement(mode=config.sandbox))  # refused before anything is made or recorded
    specs = [CheckSpec.of(name, chosen, sandbox=config.sandbox) for name, chosen in sorted(config.checks.items())]
    approval = config.integration.approval
    conn = ctx.views().conn
    task_ids = [row["task_id"] for row in tasks.tasks_of(conn, run_id)]
    by_task: dict[str, list[str]] = {}
    for row in candidates.candidates_of(conn, run_id):
        if row["boundary"] != "base-tests":  # a candidate's base-tests tree is never a step (base_tests.py)
            by_task.setdefault(row["task_id"], []).append(row["binding_id"])
    try:
        done = run_queue(ctx.ledger, ctx.clock, ctx.effector, run_id, tasks=task_ids, candidates=by_task,
                         checks=specs, approval_required=approval, artifact_dir=config.artifact_dir,
                         docket_dir=ctx.paths.ledger.parent, ledger_path=ctx.paths.ledger,
                         checked_out_target=config.integration.checked_out_target, batch=config.integration.batch_for(1))
    finally:
        ctx.update_views()
    integration = done.integration
    document = _document(integration, done)
    emit(ctx.json, document, "\n".join(shown(line) for line in _lines(integration, done)))
    if integration.status in ("completed", "open"):  # open: docket go's queue, waiting for its next step
        return 0
    stopped = next((s for s in integration.steps if s.status in STOP_CODES), None)
    if stopped is not None:
        raise Refused(STOP_CODES[stopped.status], f"the integration of run {run_id} stopped at step {stopped.step} "
                                                  f"(task {stopped.task_id}): {stopped.message or stopped.status}")
    raise Refused(integration.target_code or "target-moved",
                  f"the integration of run {run_id} did not move {integration.target_ref}: it no longer names "
                  f"{integration.expected_commit}; nothing was reset or forced")


def _document(integration: Integration, done: Integrated) -> dict[str, Any]:
    return {
        "run": integration.run_id, "status": integration.status, "target": integration.target_branch,
        "target_ref": integration.target_ref, "expected": integration.expected_commit,
        "integration_ref": integration.integration_ref, "final_commit": integration.final_commit,
        "final_tree": integration.final_tree, "target_code": integration.target_code,
        "steps": [{"step": s.step, "task_id": s.task_id, "binding_id": s.binding_id, "commit": s.commit,
                   "status": s.status, "merge": s.merge, "merge_commit": s.merge_commit, "tree": s.tree,
                   "verification_binding": s.verification_binding, "code": s.code, "message": s.message,
                   "paths": list(s.paths), "batch": list(s.batch) if s.batch else None}
                  for s in integration.steps],
        "skipped": list(done.skipped),
        "overlaps": [o.model_dump() for o in done.overlaps],
    }


def _lines(integration: Integration, done: Integrated) -> list[str]:
    lines = [f"run {integration.run_id}: integrating into {integration.target_branch} from "
             f"{integration.expected_commit}"]
    lines += [f"skipped task {task}: no confirmed candidate" for task in done.skipped]
    lines += [f"warning: tasks {o.first_task} and {o.second_task} change the same paths: {', '.join(o.paths[:10])}"
              for o in done.overlaps]
    for s in integration.steps:
        what = {"verified": f"{'already merged' if s.merge == 'already-merged' else 'merged'} as {s.merge_commit}, "
                            "checks passed",
                "conflicted": f"conflicted: {', '.join(s.paths) or s.message}",
                "rejected": f"merged as {s.merge_commit}, rejected by check: {s.message}",
                "failed": f"not merged: {s.message}",
                }.get(s.status, s.status)
        if s.status == "verified" and s.batch:
            what += f" (with steps {s.batch[0]}..{s.batch[1]}, by one check run on step {s.batch[1]}'s merge)"
        elif s.status == "merged" and integration.failing is not None:
            what = f"merged as {s.merge_commit}, in a batch whose check failed: being bisected"
        elif s.status == "merged" and integration.ended:
            what = f"merged as {s.merge_commit}, not checked: the queue stopped before its batch's check"
        lines.append(f"step {s.step} task {s.task_id} ({s.binding_id[:12]}): {what}")
    if integration.status == "completed":
        lines.append(f"{integration.target_branch} moved to {integration.final_commit} (tree {integration.final_tree})")
    elif integration.target == "moved":
        lines.append(f"{integration.target_branch} moved by someone else; not moved by docket")
    return lines
