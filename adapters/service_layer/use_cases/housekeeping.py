"""Never lose work: remove a task's worktree only when the ledger proves its content is kept elsewhere; gc; and
reconcile docket's refs and worktrees with what the ledger owns.

A worktree's content is preserved when a capture of it now (HEAD plus
everything uncommitted, the artifact directory aside) changes nothing against
the run's base, or has exactly the tree of a candidate of its task on the same
HEAD (the candidate commit's parent, so the branch's commits are kept too) and
that candidate keeps it: `worktree remove` accepts a pinned candidate (its ref
keeps the work); gc only a candidate the target's history holds, so the work of
a task that was not delivered stays where its user left it. Ignored files, and
the check output under the artifact directory, are not work and are not kept.

A candidate's ref may go when the target's history holds its work
(``candidate.preserved_by_target``: its commit, or its tree on its parent, is
reachable from the run's target), or another pin or the worktree holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....domain import candidate as candidate_aggregate
from ....domain import lease as lease_aggregate
from ....domain import task as task_aggregate
from ....domain import worker as worker_aggregate
from ....domain.effects import TargetHistory
from ....domain.kernel.errors import DocketError, OutcomeUnknown, Refused
from ....domain.events import Event
from ...world.clock import Clock, new_id
from .candidates import load_candidate, task_repository
from .leases import worktree_resource
from ..kernel.ledger import Ledger
from ..kernel.liveness import holder_liveness, process_liveness
from ..kernel.ports import CandidateRefsPort, CapturePort, InventoryPort
from .runs import load_run
from .tasks import load_task
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort, ProcessPort

__all__ = ["GitFinding", "Kept", "Preservation", "TargetHistories", "gc", "kept_elsewhere", "pinned", "preservation",
           "reconcile_git", "remove_task_worktree"]

OPEN_RUNS = ("active", "paused")


@dataclass(frozen=True)
class Preservation:
    """Whether the worktree's content is kept elsewhere: by a candidate (binding_id), unchanged, or not (why)."""

    preserved: bool
    head: str | None
    tree: str | None
    changed: tuple[str, ...]
    binding_id: str | None = None
    reason: str = ""


KeptBy = Callable[[candidate_aggregate.Candidate], tuple[bool, str]]  # whether (and how) a candidate keeps its work


def pinned(candidate: candidate_aggregate.Candidate) -> tuple[bool, str]:
    """A pinned candidate keeps its work in its ref."""
    return candidate.status == "pinned", f"it is {candidate.status}"


class TargetHistories:
    """Whether the history of a candidate's run's target holds the candidate's work; each history read once."""

    def __init__(self, ledger: Ledger, candidate_refs: CandidateRefsPort):
        self.ledger, self.candidate_refs = ledger, candidate_refs
        self._read: dict[tuple[str, str, str], TargetHistory] = {}

    def __call__(self, candidate: candidate_aggregate.Candidate) -> tuple[bool, str]:
        run = load_run(self.ledger, candidate.run_id)
        # walked down to the run's base, which every candidate's base of the run descends from (a merge step's
        # verification has the integration head it merged onto): one walk per run, not one per step
        since = run.base_commit or candidate.base
        key = (candidate.repository, run.target_branch, since)
        if key not in self._read:
            self._read[key] = self.candidate_refs.observe_target_history(Path(candidate.repository),
                                                                         run.target_branch, since)
        return candidate_aggregate.preserved_by_target(candidate, self._read[key])


def preservation(ledger: Ledger, capture: CapturePort, task: task_aggregate.Task, bindings: Sequence[str], *,
                 artifact_dir: str | None, kept_by: KeptBy = pinned) -> Preservation:
    """Capture the task's worktree twice and compare it with its candidates (bindings: the task's) that keep their
    work (kept_by)."""
    assert task.worktree is not None
    run = load_run(ledger, task.run_id)
    assert run.base_commit is not None
    captured = capture.capture_twice(Path(task.worktree), expected_head=None, base=run.base_commit,
                                     artifact_dir=artifact_dir)
    from ...world.git.capture import Unstable  # here: the capture port has loaded its module already

    if isinstance(captured, Unstable):
        return Preservation(False, None, None, captured.differing,
                            reason=f"it is being written to ({_paths(captured.differing)} changed between two "
                                   "captures)")
    if not captured.changed:
        return Preservation(True, captured.head, captured.tree, (), reason="nothing changed against the run's base")
    why_not = ""
    for binding in bindings:
        candidate = load_candidate(ledger, binding)
        if (candidate.task_id, candidate.tree, candidate.parent) != (task.task_id, captured.tree, captured.head):
            continue
        kept, why = kept_by(candidate)
        if kept:
            return Preservation(True, captured.head, captured.tree, captured.changed, binding,
                                reason=f"its content is candidate {binding[:12]}'s ({candidate.ref}): {why}")
        why_not = f"; it is candidate {binding[:12]}'s, but {why}"
    return Preservation(False, captured.head, captured.tree, captured.changed,
                        reason=f"unpinned work in {_paths(captured.changed)}" if not why_not
                        else f"work in {_paths(captured.changed)}{why_not}")


def _paths(paths: Sequence[str]) -> str:
    return ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")


def remove_task_worktree(ledger: Ledger, clock: Clock, effector: EffectorPort, processes: ProcessPort, task_id: str,
                         bindings: Sequence[str], *, artifact_dir: str | None,
                         kept_by: KeptBy = pinned) -> Preservation:
    """Remove the task's worktree and branch if its content is preserved (by a candidate that kept_by accepts);
    else Refused ``unpinned-work``."""
    task = load_task(ledger, task_id)
    if task.worktree is None:
        raise Refused(Code.NO_WORKTREE, f"task {task_id} has no worktree"
                                     + (f" (its worktree {task.removed} was removed)" if task.removed else ""))
    if task.removal_intent is None:
        _require_idle(ledger, processes, task)
        kept = preservation(ledger, effector.ports.capture, task, bindings, artifact_dir=artifact_dir,
                            kept_by=kept_by)
        if not kept.preserved:
            raise Refused(Code.UNPINNED_WORK, f"the worktree of task {task_id} holds {kept.reason}; pin it first "
                                           f"('docket candidate pin {task.run_id} --task {task_id}')")
        head, tree, binding_id = kept.head, kept.tree, kept.binding_id
        assert head is not None and tree is not None
        intent_id = new_id("unworktree")

        def decision(now: str) -> list[Event]:
            current = load_task(ledger, task_id)
            return task_aggregate.request_removal(current, intent_id=intent_id,
                                                  repository=str(task_repository(current)), head=head,
                                                  tree=tree, binding_id=binding_id, now=now)

        ledger.decide(decision, clock.now())
    else:
        kept = Preservation(True, None, None, (), reason="its removal was asked for already")
    task = load_task(ledger, task_id)
    if task.removal_intent is not None:
        effector.run_pending(only={task.removal_intent}, after=0)
        task = load_task(ledger, task_id)
    if task.removal_intent is not None:
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the removal of {task.worktree} is not known to have happened yet; "
                                                "'docket replay --apply' observes again")
    if task.removal_failure is not None and task.worktree is not None:
        raise Refused(task.removal_failure, f"the worktree of task {task_id} moved since its content was checked; "
                                            "nothing was removed (check again)")
    return kept


def _require_idle(ledger: Ledger, processes: ProcessPort, task: task_aggregate.Task) -> None:
    """No worker may be working in the worktree: its lease is not held by a process that may live, and the task's
    own worker (named after the task) is positively gone."""
    resource = worktree_resource(task.run_id, task.task_id)
    lease = ledger.get(lease_aggregate.apply, lease_aggregate.stream_of(resource))
    liveness = holder_liveness(ledger, processes, lease)
    if lease is not None and liveness not in ("dead", "none"):  # none: no lease held
        raise Refused(Code.WORKER_RUNNING, f"worker {lease.worker_id} holds the worktree of task {task.task_id} and "
                                        f"its process is {liveness}; stop it first ('docket worker stop')")
    worker = ledger.get(worker_aggregate.apply, worker_aggregate.stream_of(task.task_id))
    if worker is not None and worker.task_id == task.task_id:
        liveness = process_liveness(processes, worker)
        if liveness not in ("dead", "none"):
            raise Refused(Code.WORKER_RUNNING, f"worker {worker.worker_id} of task {task.task_id} is {liveness}; "
                                            "stop it first ('docket worker stop')")


@dataclass(frozen=True)
class Kept:
    """One thing gc looked at: what it is, and what it did or would do (remove), or why it keeps it."""

    kind: str  # worktree | execution | candidate | folder | repository-data (cli/audit/gc.py)
    name: str  # the task, check run or binding id
    path: str  # the worktree's or execution's path, or the ref
    action: str  # remove | removed | keep
    reason: str


def gc(ledger: Ledger, clock: Clock, effector: EffectorPort, processes: ProcessPort, *, tasks: Sequence[dict[str, Any]],
       candidates: Sequence[dict[str, Any]], checks: Sequence[dict[str, Any]], artifact_dir: str | None,
       apply: bool) -> list[Kept]:
    """What can go because the ledger proves it is kept elsewhere, and why everything else stays; apply removes.

    tasks: rows of tasks with a worktree; candidates: candidate rows; checks: check runs whose execution is not
    removed (all from the views). A task worktree or a candidate ref goes only when its run is closed and the
    history of the run's target holds its work.
    """
    from .checks import remove_execution

    in_target = TargetHistories(ledger, effector.ports.candidate_refs)
    found: list[Kept] = []
    bindings_of: dict[str, list[str]] = {}
    for row in candidates:
        bindings_of.setdefault(row["task_id"], []).append(row["binding_id"])
    for row in tasks:
        task = load_task(ledger, row["task_id"])
        if task.worktree is None:
            continue
        run = load_run(ledger, task.run_id)
        item = Kept("worktree", task.task_id, task.worktree, "keep", "")
        if run.status in OPEN_RUNS:
            found.append(replace(item, reason=f"run {run.run_id} is {run.status}: its worker may work here again"))
            continue
        try:
            _require_idle(ledger, processes, task)
            kept = preservation(ledger, effector.ports.capture, task, bindings_of.get(task.task_id, []),
                                artifact_dir=artifact_dir, kept_by=in_target)
        except DocketError as e:
            found.append(replace(item, reason=f"{e.code}: {e.message}"))
            continue
        if not kept.preserved:
            found.append(replace(item, reason=kept.reason))
            continue
        item = replace(item, action="remove", reason=kept.reason)
        if apply:
            try:
                remove_task_worktree(ledger, clock, effector, processes, task.task_id,
                                     bindings_of.get(task.task_id, []), artifact_dir=artifact_dir, kept_by=in_target)
                item = replace(item, action="removed")
            except DocketError as e:
                item = replace(item, action="keep", reason=f"{e.code}: {e.message}")
        found.append(item)
    for row in checks:
        candidate = load_candidate(ledger, row["binding_id"])
        check_run = candidate.check_run(row["check_id"])
        item = Kept("execution", check_run.check_id, check_run.execution, "keep", "")
        if check_run.execution_state in ("removed", "failed"):
            continue
        if check_run.result is None:
            found.append(replace(item, reason="its check has no result yet ('docket reconcile --apply' finishes "
                                              "one nobody runs)"))
            continue
        item = replace(item, action="remove", reason=f"its check {check_run.result}; an execution is never reused")
        if apply:
            state = remove_execution(ledger, clock, effector, candidate.binding_id, check_run.check_id)
            item = replace(item, action="removed" if state == "removed" else "keep",
                           reason=item.reason if state == "removed" else f"its removal is {state}")
        found.append(item)
    for row in candidates:
        if row["status"] in ("pinned", "pinning", "releasing"):
            found.append(_candidate_item(ledger, clock, effector, in_target, row["binding_id"], apply=apply))
    return found


def _candidate_item(ledger: Ledger, clock: Clock, effector: EffectorPort, in_target: TargetHistories, binding: str, *,
                    apply: bool) -> Kept:
    """A candidate's ref goes when its run is closed and the target's history holds its work (released on the
    record, by compare-and-swap); otherwise why it stays."""
    from .candidates import release_candidate

    candidate = load_candidate(ledger, binding)
    item = Kept("candidate", binding, candidate.ref, "keep", "")
    if candidate.status != "pinned":
        return replace(item, reason=f"it is {candidate.status}: 'docket replay --apply' finishes that first")
    run = load_run(ledger, candidate.run_id)
    if run.status in OPEN_RUNS:
        return replace(item, reason=f"run {run.run_id} is {run.status}: its checks and handoffs may still need it")
    kept, why = in_target(candidate)
    if not kept:
        return replace(item, reason=f"{why}; gc keeps what was not delivered ('docket candidate release' drops it)")
    item = replace(item, action="remove", reason=why)
    if not apply:
        return item
    try:
        release_candidate(ledger, clock, effector, binding, f"gc: kept: {why}")
    except DocketError as e:
        return replace(item, action="keep", reason=f"{e.code}: {e.message}")
    return replace(item, action="removed")


@dataclass(frozen=True)
class GitFinding:
    """Something under refs/docket/ or docket's worktree folders that no ledger record owns."""

    kind: str  # ref | worktree | stale-lock | ref-incomplete (adapters/service_layer/use_cases/ref_graphs.py) | pool-entry
    path: str  # the ref name or the worktree's path
    detail: str
    applied: str | None = None


def reconcile_git(inventory: InventoryPort, repository: Path, *, owned_refs: set[str], owned_worktrees: set[str],
                  apply: bool, roots: Sequence[Path | None] = (None,)) -> list[GitFinding]:
    """Refs under refs/docket/ and worktrees in docket's folders (under each of roots: None is the data folder, a
    path [workspace] root) that the ledger does not own, and stale lock files on loose objects and docket's refs;
    apply removes them (a ref by compare-and-swap from what it names; a worktree only if it has no branch checked
    out; a lock only while it is still stale)."""
    findings = []
    for ref, oid in inventory.list_docket_refs(repository):
        if ref in owned_refs:
            continue
        finding = GitFinding("ref", ref, f"names {oid}; no candidate in the ledger owns it")
        if apply:
            inventory.delete_ref(repository, ref, oid)
            finding = replace(finding, applied="deleted")
        findings.append(finding)
    places = {str(place.path): place for root in dict.fromkeys(roots)
              for place in inventory.list_docket_worktrees(repository, root)}
    for place in sorted(places.values(), key=lambda p: str(p.path)):
        if str(place.path) in owned_worktrees:
            continue
        what = place.detail or (f"a {place.kind} worktree at {place.head or 'an unknown commit'}"
                                + (f" on branch {place.branch}" if place.branch else " (detached)"))
        finding = GitFinding("worktree", str(place.path), f"{what}; no record in the ledger owns it")
        if apply:
            branch = place.branch or inventory.owns_branch(repository, Path(place.path))
            if branch is not None:
                finding = replace(finding, applied=f"kept: it has branch {branch} checked out")
            elif place.detail:
                finding = replace(finding, applied="kept: not a worktree docket made (never followed or removed)")
            else:
                inventory.remove_worktree(repository, Path(place.path), expected_head=place.head, branch=None)
                finding = replace(finding, applied="removed")
        findings.append(finding)
    for lock in inventory.stale_locks(repository):
        finding = GitFinding("stale-lock", lock, "a lock file a writer killed mid-write left behind (older than "
                             "the stale-lock threshold): nothing writes what it locks while it stays")
        if apply:
            gone = inventory.remove_stale_lock(repository, lock)
            finding = replace(finding, applied="removed" if gone else "kept: a writer took it again")
        findings.append(finding)
    return findings


def kept_elsewhere(ledger: Ledger, capture: CapturePort, candidate_refs: CandidateRefsPort, binding: str,
                   bindings: Sequence[str], *, artifact_dir: str | None) -> str | None:
    """How a candidate's work is kept other than by its ref (None: the ref is its only copy).

    The target's history keeps it (``candidate.preserved_by_target``), another
    pinned candidate with the same tree on the same parent, and the task's
    worktree while a capture of it has that tree on that HEAD.
    """
    from .base_checks import BOUNDARY

    candidate = load_candidate(ledger, binding)
    delivered, why = TargetHistories(ledger, candidate_refs)(candidate)
    if delivered:
        return why
    if candidate.boundary == BOUNDARY and candidate.parent == candidate.base:  # the run's base, pinned to check it
        try:
            if capture.commit_tree(Path(candidate.repository), candidate.base) == candidate.tree:
                return "it pins the run's base commit's own tree: no work of its own"
        except (KeyError, OSError):
            pass
    from .base_tests import BOUNDARY as BASE_TESTS

    if candidate.boundary == BASE_TESTS:  # its candidate's code and the base's protected files, made again at will
        return "it is a base-tests tree (the candidate's code with the base's tests): no work of its own"
    for other in bindings:
        if other == binding:
            continue
        twin = load_candidate(ledger, other)
        if twin.status == "pinned" and (twin.tree, twin.parent) == (candidate.tree, candidate.parent):
            return f"candidate {other[:12]} pins the same tree on the same parent"
    task = load_task(ledger, candidate.task_id)
    if task.worktree is not None and task.worktree == candidate.worktree:
        run = load_run(ledger, task.run_id)
        assert run.base_commit is not None
        try:
            captured = capture.capture_twice(Path(task.worktree), expected_head=None, base=run.base_commit,
                                             artifact_dir=artifact_dir)
        except DocketError:
            return None
        from ...world.git.capture import Capture  # here: the capture port has loaded its module already

        if isinstance(captured, Capture) and (captured.tree, captured.head) == (candidate.tree, candidate.parent):
            return f"the task's worktree {task.worktree} holds the same content"
    return None
