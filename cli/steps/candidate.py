"""docket candidate pin / list / show / release."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..console.context import Context
from ..console.parsing import command, group
from ...domain.kernel.codes import Code

if TYPE_CHECKING:
    from ...domain.candidate import Candidate
    from ...domain.config import Config
    from ...domain.task import Task

__all__ = ["register", "candidate_document"]


def register(nouns: Any, common: argparse.ArgumentParser) -> None:
    candidate = group(nouns, "candidate", "pin a task's worktree as an immutable candidate commit, list, show, release",
                      "docket candidate pin run-7k2m9x4q --task task-1")
    p = command(candidate, "pin", candidate_pin, common,
                "capture the task's worktree twice (HEAD plus everything uncommitted) and pin it as a commit under "
                "refs/docket/candidates/RUN/BINDING",
                "docket candidate pin run-7k2m9x4q --task task-1 --json")
    p.add_argument("run", metavar="RUN", help="the run id")
    p.add_argument("--task", required=True, metavar="TASK", help="the task whose worktree is pinned")
    p.add_argument("--no-wait", action="store_true", help="record the pin's intent only; 'docket replay --apply' "
                                                          "(or the next pin) carries it out")
    p = command(candidate, "list", candidate_list, common, "list the candidates of every run, or of one",
                "docket candidate list run-7k2m9x4q --task task-1")
    p.add_argument("run", metavar="RUN", nargs="?", help="only this run's candidates")
    p.add_argument("--task", metavar="TASK", help="only this task's candidates")
    p = command(candidate, "show", candidate_show, common,
                "a candidate: its commit, tree, parent, base, changed paths, ref and checks",
                "docket candidate show 3f9a1c0e")
    p.add_argument("candidate", metavar="CANDIDATE", help="binding id (or at least 8 of its digits), or the commit")
    p = command(candidate, "release", candidate_release, common,
                "delete the candidate's ref, only while it still names the pinned commit (compare-and-swap)",
                "docket candidate release 3f9a1c0e")
    p.add_argument("candidate", metavar="CANDIDATE", help="binding id (or at least 8 of its digits), or the commit")
    p.add_argument("--reason", default="released by hand", metavar="TEXT", help="why, for the record")
    p.add_argument("--discard", action="store_true",
                   help="release it even when its ref is the only copy of its work (recorded as discarded)")


def candidate_document(candidate: Candidate) -> dict[str, Any]:
    return {"binding_id": candidate.binding_id, "run_id": candidate.run_id, "task_id": candidate.task_id,
            "worker_id": candidate.worker_id, "generation": candidate.generation, "boundary": candidate.boundary,
            "status": candidate.status, "commit": candidate.commit, "tree": candidate.tree,
            "parent": candidate.parent, "base": candidate.base, "ref": candidate.ref,
            "changed_paths": list(candidate.changed_paths), "worktree": candidate.worktree}


def candidate_pin(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.candidates import pin_task
    from ...adapters.service_layer.use_cases.tasks import load_task
    from ...domain.kernel.errors import Refused
    from ..console.output import emit, shown

    a = ctx.args
    a.task = ctx.task_id(a.run, a.task)
    task = load_task(ctx.ledger, a.task)
    worker_id, generation = _worker_of(ctx, task)
    config = _config(ctx)
    pinned = pin_task(ctx.ledger, ctx.clock, ctx.effector, a.run, a.task, artifact_dir=config.artifact_dir,
                      max_file_size=config.candidates.max_file_size,
                      worker_id=worker_id, generation=generation, wait=not a.no_wait)
    ctx.update_views()
    if pinned.result == "unstable":
        shown_paths = ", ".join(pinned.differing[:5]) + (" ..." if len(pinned.differing) > 5 else "")
        raise Refused(Code.CANDIDATE_UNSTABLE, f"the worktree of task {a.task} changed between two captures "
                                            f"({shown_paths}); nothing was pinned (recorded as CandidateUnstable)")
    if pinned.result == "unchanged":
        emit(ctx.json, {"result": "unchanged", "task_id": a.task, "head": pinned.head, "tree": pinned.tree,
                        "candidate": None},
             f"task {shown(a.task)}: nothing changed since the run's base; nothing pinned")
        return 0
    c = pinned.candidate
    assert c is not None  # requested or pinned: the candidate is recorded
    if pinned.result == "requested":
        emit(ctx.json, {"result": "requested", **candidate_document(c)},
             f"candidate {c.binding_id}: pin requested (tree {c.tree}); 'docket replay --apply' carries it out")
        return 0
    emit(ctx.json, {"result": "pinned", **candidate_document(c)},
         f"candidate {c.binding_id}\n  commit {c.commit}\n  tree   {c.tree}\n  parent {c.parent}\n"
         f"  ref    {c.ref}\n  {len(c.changed_paths)} changed path(s): "
         + shown(", ".join(c.changed_paths[:10]) + (" ..." if len(c.changed_paths) > 10 else "")))
    return 0


def _worker_of(ctx: Context, task: Task) -> tuple[str | None, int | None]:
    """The task's worker and its generation, if one works on it (a launch names its worker after the task)."""
    from ...domain import worker as worker_aggregate

    worker = ctx.ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task.task_id))
    if worker is None or worker.task_id != task.task_id:
        return None, None
    return worker.worker_id, worker.generation


def _config(ctx: Context) -> Config:
    from pathlib import Path

    from ...adapters.world.files.config_file import find_config, load_config

    return load_config(find_config(Path.cwd()))


def candidate_list(ctx: Context) -> int:
    from ...projections import candidates
    from ..console.output import emit, shown

    a = ctx.args
    conn = ctx.views().conn
    if a.run is None:
        rows = [r for r in candidates.all_candidates(conn) if a.task is None or r["task_id"] == a.task]
    else:
        from ...adapters.service_layer.use_cases.runs import load_run

        load_run(ctx.ledger, a.run)  # an unknown run is run-not-found, as everywhere
        rows = candidates.candidates_of(conn, a.run, None if a.task is None else ctx.task_id(a.run, a.task))
    lines = [f"{r['binding_id'][:12]}  {r['status']:<9} {r['run_id']} {r['task_id']}  "
             f"{(r['commit'] or '-')[:12]}  {r['changed_count']} path(s)" for r in rows]
    emit(ctx.json, {"candidates": rows}, "\n".join(shown(line) for line in lines) or "no candidates")
    return 0


def candidate_show(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.candidates import find_candidate
    from ...projections import checks
    from ..console.output import emit, shown

    candidate = find_candidate(ctx.ledger, ctx.views(), ctx.args.candidate)
    rows = checks.checks_of(ctx.views().conn, candidate.binding_id)
    doc = {**candidate_document(candidate), "checks": rows}
    lines = [f"candidate {candidate.binding_id} ({candidate.status})",
             f"  run {candidate.run_id}, task {candidate.task_id}"
             + (f", worker {candidate.worker_id} generation {candidate.generation}" if candidate.worker_id else ""),
             f"  commit {candidate.commit or '-'}", f"  tree   {candidate.tree}", f"  parent {candidate.parent}",
             f"  base   {candidate.base}", f"  ref    {candidate.ref}",
             f"  changed ({len(candidate.changed_paths)}):"]
    lines += [f"    {path}" for path in candidate.changed_paths]
    lines.append(f"  checks ({len(rows)}):")
    lines += [f"    {r['check']} #{r['attempt']}: {r['status']}" + (f" ({r['code']})" if r.get("code") else "")
              for r in rows]
    emit(ctx.json, doc, "\n".join(shown(line) for line in lines))
    return 0


def candidate_release(ctx: Context) -> int:
    from ...adapters.service_layer.use_cases.candidates import find_candidate, release_candidate
    from ..console.output import emit, shown

    a = ctx.args
    candidate = find_candidate(ctx.ledger, ctx.views(), a.candidate)
    reason = a.reason
    if candidate.status == "pinned":
        from ...adapters.service_layer.use_cases.housekeeping import kept_elsewhere
        from ...domain.kernel.errors import Refused
        from ...projections import candidates
        from .worktree import artifact_dir

        bindings = [r["binding_id"] for r in candidates.candidates_of(ctx.views().conn, candidate.run_id,
                                                                       candidate.task_id)]
        kept = kept_elsewhere(ctx.ledger, ctx.effector.ports.capture, ctx.effector.ports.candidate_refs,
                              candidate.binding_id, bindings, artifact_dir=artifact_dir())
        if kept is None and not a.discard:
            raise Refused(Code.UNPRESERVED_CANDIDATE, f"{candidate.ref} is the only copy of its work (changed: "
                          f"{', '.join(candidate.changed_paths[:5])}{' ...' if len(candidate.changed_paths) > 5 else ''}"
                          "); nothing was released ('--discard' drops it anyway, on the record)")
        reason = f"{reason}; kept: {kept}" if kept else f"discarded: {reason}"
    result = release_candidate(ctx.ledger, ctx.clock, ctx.effector, candidate.binding_id, reason)
    ctx.update_views()
    emit(ctx.json, {"binding_id": candidate.binding_id, "ref": candidate.ref, "result": result},
         f"candidate {candidate.binding_id}: {shown(candidate.ref)} {result}")
    return 0
