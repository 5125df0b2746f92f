"""Decisions for effects: given an intent and what was observed, which outcome?

Adapters observe the world and report it as one of the plain values here; the
functions choose the outcome event. Nothing here looks at the world. An
observation that leaves the outcome uncertain becomes ``Unknown``: the effector
records it (with back-off) and looks again later, never treating it as failure.
Only an observation that shows the world positively in the state before the
effect becomes ``Act``: the effector carries the effect out, observes again and
decides once more.

Which events are intents, outcomes and unknowns comes from each event class's
``effect_role``, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from . import events as ev, run as run_aggregate
from .aggregate import next_event
from .kernel.values import from_ms, to_ms

__all__ = [
    "RemoteRefObservation",
    "BACKOFF_FIRST_MS",
    "BACKOFF_MAX_MS",
    "INTENT_TYPES",
    "OUTCOME_TYPES",
    "UNKNOWN_TYPES",
    "Act",
    "BranchObservation",
    "CandidateRefObservation",
    "DocketWorktree",
    "ExecutionInspection",
    "ExecutionObservation",
    "ForeignCommits",
    "MAX_FOREIGN_COMMITS",
    "IntegrationObservation",
    "MergeResult",
    "TargetHistory",
    "Unknown",
    "WorktreeObservation",
    "backoff_ms",
    "decide_base_pin",
    "is_resolved",
    "last_unknown",
    "record_unknown",
]

INTENT_TYPES = tuple(name for name, cls in ev.EVENT_TYPES.items() if cls.effect_role == "intent")
OUTCOME_TYPES = tuple(name for name, cls in ev.EVENT_TYPES.items() if cls.effect_role == "outcome")
UNKNOWN_TYPES = tuple(name for name, cls in ev.EVENT_TYPES.items() if cls.effect_role == "unknown")

BACKOFF_FIRST_MS = 1_000
BACKOFF_MAX_MS = 3_600_000
_LAST_MS = to_ms("9999-12-31T23:59:59.999Z")


@dataclass(frozen=True)
class Unknown:
    """The observation could not settle the outcome; reason says why."""

    reason: str


@dataclass(frozen=True)
class Act:
    """The world is positively in the state before the effect: carry it out, then observe again."""


@dataclass(frozen=True)
class BranchObservation:
    """What the repository says about a branch.

    found: the branch names a commit. missing: the repository has no such branch.
    not-a-commit: the branch names an object that is not a commit (definite).
    unreadable: the repository could not be read, so nothing is known.
    """

    status: Literal["found", "missing", "not-a-commit", "unreadable"]
    commit: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class WorktreeObservation:
    """What is at a task's worktree path, and what its branch names.

    absent: nothing at the path, no branch, no admin entry. branch-only: nothing
    at the path, the branch names the base (creation was interrupted after the
    branch). present: the path is this repository's linked worktree with the
    branch checked out; head is the commit the branch names now. diverged:
    anything else, detail names what differs. unreadable: nothing is known.
    """

    state: Literal["absent", "branch-only", "present", "diverged", "unreadable"]
    detail: str | None = None
    head: str | None = None


def decide_base_pin(run: run_aggregate.Run, intent: ev.RunBasePinRequested,
                    observed: BranchObservation, now: str) -> ev.Event | Unknown:
    if observed.status == "found":
        return run_aggregate.record_base_pin(run, intent.intent_id, now, commit=observed.commit)
    if observed.status == "missing":
        return run_aggregate.record_base_pin(
            run, intent.intent_id, now,
            failure=("unknown-branch", f"branch {intent.target_branch!r} does not exist in {intent.repository}"),
        )
    if observed.status == "not-a-commit":
        return run_aggregate.record_base_pin(
            run, intent.intent_id, now,
            failure=("branch-not-a-commit", f"branch {intent.target_branch!r} does not name a commit: {observed.detail}"),
        )
    return Unknown(observed.detail or "repository unreadable")


def is_resolved(history: Iterable[tuple[int, ev.Event]], intent_id: str) -> bool:
    """True once an outcome for intent_id is in the stream: the one place this is decided."""
    return any(e.effect_role == "outcome" and getattr(e, "intent_id", None) == intent_id for _, e in history)


def last_unknown(history: Iterable[tuple[int, ev.Event]], intent_id: str) -> ev.Event | None:
    """The latest uncertain observation recorded for intent_id in its stream, if any."""
    last = None
    for _, e in history:
        if e.effect_role == "unknown" and getattr(e, "intent_id", None) == intent_id:
            last = e
    return last


def backoff_ms(observations: int) -> int:
    """How long to wait after the n-th unknown in a row: 1s, 2s, 4s, ... at most an hour."""
    return min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS << min(observations - 1, 32))


def record_unknown(stream: str, version: int, intent_id: str, reason: str,
                   last: ev.Event | None, now: str) -> ev.IntentOutcomeUnknownV2 | None:
    """The unknown to record, or None when it would only repeat the last one inside its back-off.

    A new reason is recorded at once. The same reason again is recorded only once
    the back-off has run out, counting the observations in a row.
    """
    reason = reason[:4000] or "no reason given"
    if last is not None and getattr(last, "reason", None) == reason:
        retry_at = getattr(last, "retry_at", None)
        if retry_at is not None and to_ms(now) < to_ms(retry_at):
            return None
        observations = getattr(last, "observations", 1) + 1
    else:
        observations = 1
    retry_at = from_ms(min(_LAST_MS, to_ms(now) + backoff_ms(observations)))
    return next_event(ev.IntentOutcomeUnknownV2, stream, version, now, intent_id=intent_id, reason=reason,
                      observations=observations, retry_at=retry_at)


@dataclass(frozen=True)
class CandidateRefObservation:
    """What a candidate ref names, compared with the (parent, tree) it should pin.

    missing: no such ref. matching: the ref names a commit whose only parent is
    the expected parent and whose tree is the expected tree (commit: its id).
    diverged: the ref names anything else (commit: what it names; detail says
    what differs). unreadable: nothing is known.
    """

    state: Literal["missing", "matching", "diverged", "unreadable"]
    commit: str | None = None
    detail: str = ""
    remote: RemoteRefObservation | None = None  # the same ref on the run's shared remote, when it has one


@dataclass(frozen=True)
class RemoteRefObservation:
    """What a ref on a shared git remote names: found (commit), missing, or unreachable (nothing is known: the
    remote could not be reached or read, or its name now stands for another URL than the run recorded)."""

    state: Literal["found", "missing", "unreachable"]
    commit: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class TargetHistory:
    """The commits git found reachable from a target branch, walked from its tip back to a run's base.

    commits maps each commit walked to (tree, parents). tip None: the branch
    does not exist (detail: or could not be read). complete: the walk reached
    the base (or the roots) on every line; False: it stopped at its bound or at
    a missing object, so a commit not in commits may still be reachable.
    """

    branch: str
    tip: str | None
    commits: Mapping[str, tuple[str, tuple[str, ...]]]
    complete: bool
    detail: str = ""

    @cached_property
    def trees_on_parents(self) -> dict[tuple[str, str], str]:
        """(tree, parent) -> a walked commit with that tree and that parent."""
        return {(tree, parent): commit for commit, (tree, parents) in self.commits.items() for parent in parents}


@dataclass(frozen=True)
class ForeignCommits:
    """The commits a target branch names that docket did not leave there: reachable from found, not from expected
    (``git rev-list found ^expected``), newest first, at most MAX_FOREIGN_COMMITS of them; count: how many were
    walked; complete: the walk ended (False: it stopped at its bound or at a missing object, detail says which);
    keeps_expected: found still holds expected in its history (False: the history the run stood on was rewritten
    or dropped)."""

    commits: tuple[str, ...]
    count: int
    complete: bool
    keeps_expected: bool
    detail: str = ""


MAX_FOREIGN_COMMITS = 1000


@dataclass(frozen=True)
class ExecutionObservation:
    """What is at an execution's path before a check runs there.

    absent: nothing at the path and no admin entry names it. ready: a
    registered linked worktree of this repository, detached at the commit, with
    no tracked or untracked change: it may be reused. diverged: anything else
    at the path (detail says what). unreadable: nothing is known. unsafe:
    nothing at the path, and the commit's tree names a path no checkout may
    write ('.GIT', '..') or nests too deep: it never will be made.
    """

    state: Literal["absent", "ready", "diverged", "unreadable", "unsafe"]
    detail: str = ""


@dataclass(frozen=True)
class ExecutionInspection:
    """An execution after its check: matching (detached at the commit, clean outside the untracked artifact
    directory), mutated (detail says how), or missing (nothing, or no worktree, at the path)."""

    state: Literal["matching", "mutated", "missing"]
    detail: str = ""


@dataclass(frozen=True)
class DocketWorktree:
    """A workspace or execution in docket's folders, as found on disk (for gc and reconcile).

    kind: task (``<data>/workspaces/<repository key>/<run>/<task>``) or execution
    (``<data>/executions/<repository key>/<run>/<binding>/<name>``). exists: something
    is at path (a symlink or a file too: detail says so, never followed).
    registered: it is a repository of its own borrowing this repository's objects
    (admin: ``.git``, its git dir). branch: the branch (short name) HEAD is a
    symbolic ref to, None when detached or unknown; head: the commit HEAD
    resolves to, None when unknown, both read from its own git dir. detail: set
    only for what is no workspace docket made (a symlink or file where a folder
    should be, a folder that is no repository of this one's).
    path: absolute, as listed (a string: the domain has no paths).
    """

    path: str
    kind: Literal["task", "execution"]
    exists: bool
    registered: bool
    branch: str | None = None
    head: str | None = None
    admin: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class IntegrationObservation:
    """What an integration ref (``refs/docket/integrations/<run>``) names, relative to one merge step.

    missing: no such ref. at-parent: it names the step's expected parent (the
    step is still to do). merged: it names a commit that has both the expected
    parent and the candidate as ancestors (commit: its id; the step is done).
    diverged: it names anything else (commit: what it names; detail says what).
    unreadable: nothing is known.
    """

    state: Literal["missing", "at-parent", "merged", "diverged", "unreadable"]
    commit: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class MergeResult:
    """One candidate merged into an integration head, computed in the object store (no ref moved).

    merged: commit is the two-parent merge commit [head, candidate], tree its
    tree. already-merged: the candidate is an ancestor of head (or head
    itself): nothing was written; commit and tree are head's. conflicted: the
    paths (quoted as ``quote_path`` does, sorted) that do not merge; nothing
    was written. unmergeable: the histories have no merge base (detail says
    so); nothing was written. unreadable: head or candidate is
    no commit in the repository, or it could not be read (detail says why).
    """

    state: Literal["merged", "already-merged", "conflicted", "unmergeable", "unreadable"]
    commit: str | None = None
    tree: str | None = None
    conflicts: tuple[str, ...] = ()
    detail: str = ""
