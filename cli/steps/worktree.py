"""docket worktree remove: a task's worktree and branch go only when the ledger proves their content is kept."""

from __future__ import annotations

import argparse
from typing import Any

from ..console.context import Context
from ..console.parsing import command, group

__all__ = ["artifact_dir", "register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    worktree = group(nouns, "worktree", "remove a task's worktree once its work is kept elsewhere",
                     "docket worktree remove task-1")
    p = command(worktree, "remove", worktree_remove, common,
                "remove the task's worktree and branch if a pinned candidate has exactly its content (or nothing "
                "changed); otherwise refuse with exit 3 unpinned-work, naming the changed paths",
                "docket worktree remove task-1 --json")
    p.add_argument("task", metavar="TASK", help="the task whose worktree is removed")


def artifact_dir() -> str | None:
    from pathlib import Path

    from ...adapters.world.files.config_file import find_config, load_config

    return load_config(find_config(Path.cwd())).artifact_dir


def worktree_remove(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.housekeeping import remove_task_worktree
    from ...adapters.service_layer.use_cases.tasks import load_task
    from ...projections import candidates
    from ..console.output import emit, shown

    task = load_task(ctx.ledger, ctx.args.task)
    path = task.worktree
    bindings = [row["binding_id"] for row in candidates.candidates_of(ctx.views().conn, task.run_id, task.task_id)]
    kept = remove_task_worktree(ctx.ledger, ctx.clock, ctx.effector, ctx.effector.ports.processes, task.task_id,
                                bindings, artifact_dir=artifact_dir())
    ctx.update_views()
    emit(ctx.json, {"task_id": task.task_id, "worktree": path, "result": "removed", "preserved_by": kept.binding_id
                    and "candidate" or "unchanged", "binding_id": kept.binding_id, "reason": kept.reason},
         f"task {shown(task.task_id)}: worktree {shown(path)} removed; its work is kept: {shown(kept.reason)}")
    return 0
