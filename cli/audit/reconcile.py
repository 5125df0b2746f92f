"""docket reconcile: the ledger's workers against this machine's processes; --apply converges them."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from ..console.context import Context
from ..console.output import emit, shown
from ..console.parsing import command

__all__ = ["register"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    p = command(nouns, "reconcile", reconcile, common,
                "report workers whose process is gone or unsupervised, processes the ledger does not know, "
                "supervisions of runs whose docket process is gone, check runs nobody runs any more, refs "
                "under refs/docket/ and worktrees in docket's folders that no ledger record owns, what a killed give "
                "back or placement left in the pool of executions, lock files a killed "
                "writer left on loose objects or docket's refs, refs docket owns (or targets) that name objects "
                "missing from the repository, and symlinks or files planted where docket makes its own folders",
                "docket reconcile --apply --json")
    p.add_argument("--apply", action="store_true",
                   help="record gone processes as exited, stop unsupervised and unknown ones, end gone "
                        "supervisions at their last sign of life, finish abandoned check runs, delete unowned refs "
                        "(compare-and-swap), remove unowned worktrees that have no branch checked out, discard the "
                        "pool's untrusted executions, remove stale "
                        "lock files, make a ref naming missing objects whole again from the ledger's record or release "
                        "it, and move planted symlinks aside (renamed to <name>.planted-<n>, never deleted) and make "
                        "the folder again")


def reconcile(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.abandoned_checks import settle_abandoned_checks
    from ...adapters.service_layer.use_cases.reconciliation import reconcile_supervisions
    from ...adapters.service_layer.use_cases.reconciliation import reconcile_workers
    from ...projections import runs, workers
    from ...projections.workers import active_workers

    a = ctx.args
    planted = _reconcile_folders(ctx, apply=a.apply)  # first: what follows may write into those folders
    if a.apply:  # pending launches and stops first: an abandoned launch is resolved, a stop finished
        ctx.effector.run_pending(after=0)
    conn = ctx.views(writable=True).conn
    running = [w["worker_id"] for w in active_workers(conn)]
    findings = reconcile_workers(ctx.ledger, ctx.clock, ctx.effector, running, ctx.paths.ledger, apply=a.apply)
    open_runs = [r["run_id"] for r in runs.list_runs(conn) if r["status"] in ("active", "paused")]
    findings += reconcile_supervisions(ctx.ledger, ctx.clock, ctx.effector.ports.processes, open_runs,
                                       lambda run_id: [w["worker_id"] for w in workers.workers_of(conn, run_id)],
                                       apply=a.apply)
    settled = (settle_abandoned_checks(ctx.ledger, ctx.clock, ctx.effector, ctx.views().conn, stop_orphans=True)
               if a.apply else [])
    ctx.update_views()
    git_findings = _reconcile_git(ctx, apply=a.apply)
    ctx.update_views()
    unfinished = [] if a.apply else _unfinished_checks(ctx)
    total = len(findings) + len(git_findings) + len(unfinished) + len(planted)
    lines = [f"{total} finding(s)" + ("" if a.apply or not total else "; --apply converges them")]
    for f in findings:
        who = f"worker {shown(f.worker_id)} generation {f.generation}" if f.worker_id else "a process"
        lines.append(f"  {f.kind}: {who}, pid {f.pid}: {shown(f.detail)}"
                     + (f" -> {f.applied}" if f.applied else ""))
    for g in git_findings:
        what = g.kind if g.kind in ("stale-lock", "ref-incomplete", "pool-entry") else f"unowned {g.kind}"
        lines.append(f"  {what}: {shown(g.path)}: {shown(g.detail)}" + (f" -> {g.applied}" if g.applied else ""))
    for f in planted:
        lines.append(f"  unsafe-path: {shown(f.path)} is {shown(f.found)}, where docket makes a {f.kind}"
                     + (f" -> {shown(f.applied)}" if f.applied else "; --apply moves it aside and makes the folder"))
    for u in unfinished:
        lines.append(f"  unfinished check: {shown(u['check_id'])} ({shown(u['check'])} on {u['binding_id'][:12]}): "
                     f"{u['status']}, execution {u['execution_state']}")
    for s in settled:
        lines.append(f"  check {shown(s['check_id'])}: {shown(s['done'])}")
    emit(ctx.json, {"applied": a.apply, "findings": [asdict(f) for f in findings],
                    "git": [asdict(g) for g in git_findings], "unfinished_checks": unfinished,
                    "settled_checks": settled, "folders": [asdict(f) for f in planted]}, "\n".join(lines))
    return 0


def _reconcile_folders(ctx: Context, *, apply: bool) -> list[Any]:
    """Symlinks or files planted where docket makes its folders (beside the ledger, in the data folder)."""
    from ...adapters.world.files.paths import data_dir, repository_key
    from ...adapters.world.files.planted import find_planted, move_aside

    docket_dir = ctx.paths.ledger.parent
    roots = list(dict.fromkeys([data_dir(), *configured_workspace_roots()]))
    data = [(root, repository_key(ctx.repository)) for root in roots] if ctx.repository is not None else []
    found = find_planted(docket_dir, data, files=(ctx.paths.views,))
    return [move_aside(f) for f in found] if apply else found


def configured_workspace_roots() -> list[Any]:
    """docket.toml's [workspace] root, when one is set and the file reads."""
    from pathlib import Path

    from ...adapters.service_layer.go.settings import workspace_root
    from ...adapters.world.files.config_file import find_config, load_config
    from ...domain.kernel.errors import DocketError

    try:
        root = workspace_root(load_config(find_config(Path.cwd())))
    except DocketError:
        return []  # a docket.toml that does not read: the data folder is still looked at
    return [root] if root is not None else []


def _unfinished_checks(ctx: Context) -> list[dict[str, Any]]:
    from ...projections import checks

    return [{k: row[k] for k in ("check_id", "binding_id", "check", "status", "execution_state")}
            for row in checks.unfinished(ctx.views().conn)]


def _reconcile_git(ctx: Context, *, apply: bool) -> list[Any]:
    """Refs under refs/docket/ and worktrees in docket's folders that no ledger record owns."""
    from ...adapters.service_layer.use_cases.housekeeping import reconcile_git
    from ...adapters.world.files.paths import task_worktree_path
    from ...projections import candidates, checks, integrations, tasks

    from ...domain.kernel.errors import Refused
    from ..console.output import warn

    repository = ctx.repository
    if repository is None:
        return []
    try:
        ctx.require_own_repository(ctx.ledger)
    except Refused as e:  # never touch refs or worktrees of a repository this ledger was not made for
        warn(e.code, f"{e.message}; its refs and worktrees were not reconciled")
        return []
    conn = ctx.views().conn
    owned_refs = {row["ref"] for row in candidates.all_candidates(conn)
                  if row["status"] in ("pinning", "pinned", "releasing", "diverged")}
    owned_refs |= {row["integration_ref"] for row in integrations.all_integrations(conn).values()
                   if row["integration_ref"]}
    owned_worktrees = {row["worktree"] for row in tasks.all_tasks(conn) if row["worktree"]}
    roots = [None, *configured_workspace_roots()]
    owned_worktrees |= {str(task_worktree_path(repository, row["run_id"], row["task_id"], root))
                        for row in tasks.all_tasks(conn) if row["worktree"] or not row["worktree_removed"]
                        for root in roots}
    owned_worktrees |= {row["execution"] for row in checks.live_executions(conn)
                        if row["execution_state"] in ("requested", "ready", "removing")}
    from ...adapters.service_layer.merge_queue.integration_steps import complete_merges
    from ...adapters.service_layer.use_cases.ref_graphs import reconcile_ref_graphs

    found = reconcile_git(ctx.effector.ports.inventory, repository, owned_refs=owned_refs,
                          owned_worktrees=owned_worktrees, apply=apply, roots=roots)
    for root in roots:
        found += _untrusted_pool_entries(repository, root, apply=apply)
    return found + reconcile_ref_graphs(ctx.ledger, ctx.clock, ctx.effector, ctx.views().conn, repository,
                                        apply=apply, merges_again=complete_merges)


def _untrusted_pool_entries(repository: Any, root: Any, *, apply: bool) -> list[Any]:
    """What the pool of executions holds that no trustworthy record describes (a give back or a placement killed
    half-way): the next execution made would discard it too; reconcile does it without one."""
    from ...adapters.service_layer.use_cases.housekeeping import GitFinding
    from ...adapters.world.workspaces.executions import untrusted_pool_entries

    return [GitFinding("pool-entry", str(path), "in the pool of executions, no trustworthy record describes it",
                       "discarded" if apply else None)
            for path in untrusted_pool_entries(repository, root, apply=apply)]
