"""Use cases of candidates: pin what a task's worktree holds now, release a pin, find a candidate.

A pin captures the worktree twice (HEAD plus everything uncommitted, the
artifact directory aside). Two captures that differ are recorded as
CandidateUnstable and nothing is pinned; a capture that changes nothing against
the task's base pins nothing. Otherwise the binding id is derived from the
capture and the pin intent is recorded on the candidate's stream, then driven
by the effector: the same capture pinned twice is one candidate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ....domain import candidate as candidate_aggregate
from ....domain import task as task_aggregate
from ....domain.aggregate import next_event
from ....domain.kernel.errors import NotFound, OutcomeUnknown, Refused
from ....domain.events import CandidateUnstable, Event
from ....domain.kernel.values import DEFAULT_MAX_FILE_SIZE
from ...world import faults
from ...world.clock import Clock, new_id
from ..kernel.ledger import Ledger
from .runs import load_run
from .tasks import load_task
from ....domain.kernel.codes import Code

if TYPE_CHECKING:
    from ..kernel.ports import EffectorPort
    from ....projections.views import Views

__all__ = ["Pinned", "boundary_of", "find_candidate", "load_candidate", "pin_task", "pin_tree", "release_candidate"]


@dataclass(frozen=True)
class Pinned:
    """What a pin did: pinned (the candidate), requested (its intent recorded, not driven: --no-wait), unchanged
    (nothing to pin), or unstable (the paths that moved)."""

    result: Literal["pinned", "requested", "unchanged", "unstable"]
    task_id: str
    candidate: candidate_aggregate.Candidate | None = None
    head: str | None = None
    tree: str | None = None
    differing: tuple[str, ...] = ()


def boundary_of(generation: int | None) -> str:
    """Which phase a capture closes: a worker generation's work, or the task's work outside any worker."""
    return "task" if generation is None else f"generation-{generation}"


def load_candidate(ledger: Ledger, binding_id: str) -> candidate_aggregate.Candidate:
    candidate = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding_id))
    if candidate is None:
        raise NotFound(Code.CANDIDATE_NOT_FOUND, f"no candidate {binding_id}")
    return candidate


def find_candidate(ledger: Ledger, views: Views, key: str) -> candidate_aggregate.Candidate:
    """The candidate named by its binding id, a unique prefix of it (at least 8 digits), or its commit."""
    import re

    if not re.fullmatch(r"[0-9a-f]{8,64}", key):
        from ....domain.kernel.errors import BadInput

        raise BadInput(Code.BAD_CANDIDATE, f"{key!r} is not a binding id or a commit (8 to 64 lower-case hex digits)")
    if len(key) == 64 and ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(key)) is not None:
        return load_candidate(ledger, key)
    from ....projections.candidates import matching

    matches = sorted({row["binding_id"] for row in matching(views.conn, key)})
    if not matches:
        raise NotFound(Code.CANDIDATE_NOT_FOUND, f"no candidate has binding id or commit {key}")
    if len(matches) > 1:
        raise Refused(Code.CANDIDATE_AMBIGUOUS, f"{key} names {len(matches)} candidates; give more digits")
    return load_candidate(ledger, matches[0])


def pin_task(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, task_id: str, *,
             artifact_dir: str | None, worker_id: str | None = None, generation: int | None = None,
             wait: bool = True, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Pinned:
    """Capture the task's worktree twice and pin it; drive the pin to its outcome (unless not wait)."""
    from ....domain.binding import binding_id, binding_seed, candidate_ref, worktree_identity

    task = load_task(ledger, task_id)
    run = load_run(ledger, run_id)
    if task.run_id != run.run_id:
        raise Refused(Code.TASK_NOT_IN_RUN, f"task {task_id} does not belong to run {run_id}")
    if task.worktree is None:
        raise Refused(Code.NO_WORKTREE, f"task {task_id} has no worktree yet ('docket worker launch' makes it)")
    if run.base_commit is None:
        raise Refused(Code.RUN_BASE_NOT_PINNED, f"run {run_id} has no pinned base commit yet")
    worktree, base_commit = task.worktree, run.base_commit
    # what changed is measured from where the worktree started: a task that depends on others starts from their work
    captured = effector.ports.capture.capture_twice(Path(task.worktree), expected_head=None,
                                                    base=task.base or run.base_commit, artifact_dir=artifact_dir,
                                                    repository=task_repository(task), max_file_size=max_file_size)
    boundary = boundary_of(generation)
    from ...world.git.capture import Unstable  # here: the capture port has loaded its module already

    if isinstance(captured, Unstable):
        differing = captured.differing

        def unstable(now: str) -> Event:
            current = load_task(ledger, task_id)
            return next_event(CandidateUnstable, task_aggregate.stream_of(task_id), current.version, now,
                              run_id=run_id, task_id=task_id, worker_id=worker_id, generation=generation,
                              boundary=boundary, differing_paths=list(differing[:1000]))

        ledger.decide(unstable, clock.now())
        return Pinned("unstable", task_id, differing=differing)
    if not captured.changed:
        return Pinned("unchanged", task_id, head=captured.head, tree=captured.tree)
    _require_recordable(captured.changed, task_id)
    faults.crash_point("pin:after-capture")
    identity = worktree_identity(os.path.realpath(task.worktree), captured.git_dir)
    binding = binding_id(binding_seed(run_id, boundary), captured.head, captured.tree, captured.changed, identity)
    ref = candidate_ref(run_id, binding)
    intent_id = new_id("pin")

    def decision(now: str) -> list[Event]:
        existing = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
        return candidate_aggregate.request_pin(
            existing, load_run(ledger, run_id), intent_id=intent_id, task_id=task_id, worker_id=worker_id,
            generation=generation, boundary=boundary, binding_id=binding, repository=str(task_repository(task)),
            worktree=worktree, ref=ref, parent=captured.head, tree=captured.tree, base=base_commit,
            changed_paths=captured.changed, now=now)

    appended = ledger.decide(decision, clock.now())
    candidate = load_candidate(ledger, binding)
    if not wait and candidate.pin_intent is not None:
        return Pinned("requested", task_id, candidate, head=captured.head, tree=captured.tree)
    if appended or candidate.pin_intent is not None:
        drive(effector, candidate.pin_intent or intent_id,
              lambda: load_candidate(ledger, binding).pin_intent is None)
        candidate = load_candidate(ledger, binding)
    if candidate.status == "pinned":  # found pinned (no act ran), or a prune deleted objects after the act looked
        complete_pinned(effector, candidate)
    return Pinned("pinned", task_id, settled(candidate), head=captured.head, tree=captured.tree)


def complete_pinned(effector: EffectorPort, candidate: candidate_aggregate.Candidate) -> list[str]:
    """Every object the pinned candidate's ref reaches in the repository, what a prune deleted written again from
    its workspace; the ids still missing (empty: whole)."""
    from ..kernel.repository_intents import pin_message

    return effector.ports.candidate_refs.complete_candidate(
        Path(candidate.repository), candidate.ref, candidate.parent, candidate.tree, pin_message(candidate),
        worktree=Path(candidate.worktree), base=candidate.base)


def _require_recordable(changed: tuple[str, ...], task_id: str) -> None:
    """As the capture checks before it writes anything (capture.py); again here, whatever port captured."""
    candidate_aggregate.require_recordable(changed, f"the worktree of task {task_id}")


CONTENDED_TRIES = 20  # another docket process making the same ref: observed again this often, 0.1 s apart


def drive(effector: EffectorPort, intent_id: str, settled: Any) -> None:
    """Drive the intent; while its outcome is unknown (another process is making the same ref at this moment),
    observe again a few times before leaving it to 'docket replay --apply'."""
    import time

    effector.run_pending(only={intent_id}, after=0)
    for _ in range(CONTENDED_TRIES):
        if settled():
            return
        time.sleep(0.1)
        effector.run_pending(only={intent_id}, after=0, force=True)


def task_repository(task: task_aggregate.Task) -> Path:
    """The git common dir a task's worktree belongs to: the one its WorktreeRequested named (a worktree of a ledger
    from before workspaces lived at <common>/docket/worktrees/<run>/<task>)."""
    assert task.worktree is not None
    return Path(task.repository) if task.repository else Path(task.worktree).parents[3]


def settled(candidate: candidate_aggregate.Candidate) -> candidate_aggregate.Candidate:
    """The candidate, once its pin has an outcome; the outcome as an error otherwise."""
    if candidate.status == "diverged":
        raise Refused(Code.CANDIDATE_DIVERGED, f"{candidate.ref} names another commit"
                      f"{' (' + candidate.diverged_commit + ')' if candidate.diverged_commit else ''} than this "
                      "capture's; it is left untouched")
    if candidate.status == "pinning":
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the pin of candidate {candidate.binding_id} is not known to have "
                                                "happened yet; 'docket replay --apply' observes again")
    return candidate


def release_candidate(ledger: Ledger, clock: Clock, effector: EffectorPort, binding: str, reason: str) -> str:
    """Delete the candidate's ref by compare-and-swap; released, observed (already gone), or the failure."""
    intent_id = new_id("release")

    def decision(now: str) -> list[Event]:
        return candidate_aggregate.request_release(load_candidate(ledger, binding), intent_id=intent_id,
                                                   reason=reason, now=now)

    ledger.decide(decision, clock.now())
    candidate = load_candidate(ledger, binding)
    if candidate.release_intent is not None:
        release = candidate.release_intent
        drive(effector, release, lambda: load_candidate(ledger, binding).release_intent is None)
        candidate = load_candidate(ledger, binding)
    if candidate.status == "releasing":
        raise OutcomeUnknown(Code.OUTCOME_UNKNOWN, f"the release of {candidate.ref} is not known to have happened yet")
    if candidate.status != "released":
        raise Refused(candidate.release_failure or "candidate-not-released",
                      f"{candidate.ref} was not released: it names another commit than the pinned "
                      f"{candidate.commit}; it is left untouched")
    return "released"


def pin_tree(ledger: Ledger, clock: Clock, effector: EffectorPort, run_id: str, task_id: str, *, repository: Path,
             parent: str, tree: str, boundary: str, source: str, output: Path,
             changed_since: str | None = None, changed: tuple[str, ...] | None = None) -> candidate_aggregate.Candidate:
    """Pin a tree already in the object store as a candidate of the task (no worker, no worktree capture): the
    commit of tree on parent at the candidate's ref. source names where the tree comes from (an integration ref); the
    changed paths are the tree's against changed_since (default: the run's base; a merge step's verification gives
    the integration head its steps merged onto, so a pin lists its steps' paths, not every path since the base);
    output is the folder its checks' artifacts are copied back to (it stands for the candidate's worktree); changed,
    when given, is recorded as its changed paths instead (a base-tests tree: the paths it sets aside). The same inputs
    give the same candidate, pinned once."""
    from ....domain.binding import binding_id, binding_seed, candidate_ref, worktree_identity

    run = load_run(ledger, run_id)
    if run.base_commit is None:
        raise Refused(Code.RUN_BASE_NOT_PINNED, f"run {run_id} has no pinned base commit yet")
    since = changed_since or run.base_commit
    if changed is None:
        changed = effector.ports.capture.changed_paths(repository, since, parent)
    _require_recordable(changed, task_id)
    identity = worktree_identity(str(repository), source)
    binding = binding_id(binding_seed(run_id, boundary), parent, tree, changed, identity)
    intent_id = new_id("pin")

    def decision(now: str) -> list[Event]:
        existing = ledger.get(candidate_aggregate.apply, candidate_aggregate.stream_of(binding))
        return candidate_aggregate.request_pin(
            existing, load_run(ledger, run_id), intent_id=intent_id, task_id=task_id, worker_id=None, generation=None,
            boundary=boundary, binding_id=binding, repository=str(repository), worktree=str(output),
            ref=candidate_ref(run_id, binding), parent=parent, tree=tree, base=since, changed_paths=changed,
            now=now)

    ledger.decide(decision, clock.now())
    candidate = load_candidate(ledger, binding)
    if candidate.pin_intent is not None:
        drive(effector, candidate.pin_intent, lambda: load_candidate(ledger, binding).pin_intent is None)
        candidate = load_candidate(ledger, binding)
    return settled(candidate)
