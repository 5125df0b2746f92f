"""docket gc: what can go because the ledger and the target's history prove it is kept elsewhere, and why everything
else stays."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from ..console.context import Context
from ..console.parsing import command

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "gc", gc, common,
                "list candidate refs and task worktrees of closed runs whose work the target's history holds (or "
                "that changed nothing), finished checks' executions, empty execution folders a crash left, idle "
                "executions kept for reuse (all once no run is open, else beyond the newest few), the workspaces "
                "and executions in the data folder of repositories that are gone, and why everything else is kept; "
                "--apply removes what can go",
                "docket gc\n  docket gc --apply --json")
    p.add_argument("--apply", action="store_true",
                   help="remove what is proven kept elsewhere (candidate refs released, worktrees removed, on the "
                        "record), and the data of repositories that are gone")


def gc(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.housekeeping import gc as collect
    from ...projections import candidates, checks, tasks
    from ..console.output import emit, shown
    from ..steps.worktree import artifact_dir

    a = ctx.args
    conn = ctx.views().conn
    found = collect(ctx.ledger, ctx.clock, ctx.effector, ctx.effector.ports.processes,
                    tasks=tasks.tasks_with_worktrees(conn), candidates=candidates.all_candidates(conn),
                    checks=checks.live_executions(conn), artifact_dir=artifact_dir(), apply=a.apply)
    found += _empty_execution_folders(ctx, apply=a.apply)
    found += _idle_executions(ctx, apply=a.apply)
    found += _forgotten_data(ctx, apply=a.apply)
    ctx.update_views()
    going = [k for k in found if k.action in ("remove", "removed")]
    lines = [f"{len(going)} to remove" if not a.apply else f"{sum(k.action == 'removed' for k in found)} removed"]
    lines += [f"  {k.action:<7} {k.kind} {k.name}: {k.path} ({k.reason})" for k in found]
    emit(ctx.json, {"applied": a.apply, "items": [asdict(k) for k in found]}, "\n".join(shown(line) for line in lines))
    return 0


def _empty_execution_folders(ctx: Context, *, apply: bool) -> list[Any]:
    """Empty <run>/<binding> folders a crash left under the repository's executions (in the data folder and under
    [workspace] root)."""
    from ...adapters.service_layer.use_cases.housekeeping import Kept
    from ...adapters.world.workspaces.executions import empty_execution_folders
    from ...adapters.world.files.paths import executions_root
    from .reconcile import configured_workspace_roots

    if ctx.repository is None:
        return []
    return [Kept("folder", str(folder.relative_to(executions_root(ctx.repository, root))), str(folder),
                 "removed" if apply else "remove", "empty: a crash left it between making it and an execution")
            for root in [None, *configured_workspace_roots()]
            for folder in empty_execution_folders(ctx.repository, root, apply=apply)]


def _idle_executions(ctx: Context, *, apply: bool) -> list[Any]:
    """Idle folders of the repository's pool of executions: all once no run of this ledger is open, else those
    beyond the newest few the pool keeps for reuse. A placed one (a check runs there) is never among them."""
    from ...adapters.service_layer.use_cases.housekeeping import Kept
    from ...adapters.world.workspaces.execution_pool import KEEP_IDLE
    from ...adapters.world.workspaces.executions import idle_executions
    from ...projections import runs
    from .reconcile import configured_workspace_roots

    if ctx.repository is None:
        return []
    open_runs = [r["run_id"] for r in runs.list_runs(ctx.views().conn) if r["status"] in ("active", "paused")]
    keep = KEEP_IDLE if open_runs else 0
    reason = (f"idle, beyond the newest {keep} kept for reuse while run {open_runs[0]} is open" if open_runs
              else "idle, kept for reuse, and no run is open")
    return [Kept("execution", folder.name, str(folder), "removed" if apply else "remove", reason)
            for root in [None, *configured_workspace_roots()]
            for folder in idle_executions(ctx.repository, root, keep=keep, apply=apply)]


def _forgotten_data(ctx: Context, *, apply: bool) -> list[Any]:
    """The folders in the data folder (and under [workspace] root) of repositories that are gone: their path no
    longer exists, or holds no git repository, or one with another identity (adapters/world/workspaces/data_owners.py). Those
    of the repository gc runs in are never among them; apply removes them, never following a symlink."""
    from ...adapters.service_layer.use_cases.housekeeping import Kept
    from ...adapters.world.workspaces.data_owners import forgotten_data, record_owner
    from ...adapters.world.files.paths import data_dir, executions_root, repository_key, workspaces_root
    from .reconcile import configured_workspace_roots

    roots = [data_dir(), *configured_workspace_roots()]
    mine: list[str] = []
    if ctx.repository is not None:
        mine.append(repository_key(ctx.repository))
        for root in roots:  # this repository's folders made before docket recorded whose they are: recorded now
            for folder in (workspaces_root(ctx.repository, root), executions_root(ctx.repository, root)):
                if folder.is_dir() and not folder.is_symlink():
                    record_owner(folder, ctx.repository)
    return [Kept("repository-data", f.key, f.path, f.action, f.reason)
            for f in forgotten_data(roots, keep_keys=mine, apply=apply)]
