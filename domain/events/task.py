"""Events of the Task aggregate (stream ``task:<task_id>``): its plan and its worktree."""


from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ..kernel.values import MAX_SAFE_INT
from .base import AbsolutePath, BranchName, Code, Commit, Event, Host, Id, RepositoryPath, Sha256, Text

__all__ = ["TaskFeedbackRecorded", "TaskFinished", "TaskPlanned", "TaskPlannedV2", "WorktreeCreated", "WorktreeFailed", "WorktreeLost",
           "WorktreePrepared", "WorktreeRemovalFailed", "WorktreeRemovalRequested", "WorktreeRemoved",
           "WorktreeRequested", "WorktreeRequestedV2"]


class TaskPlanned(Event):
    """Legacy (v1): a unit of work is planned inside a run, with a title only."""

    name = "TaskPlanned"
    task_id: Id
    run_id: Id
    title: Text


class TaskPlannedV2(Event):
    """A unit of work is planned inside a run; its prompt (the agent's instructions) is bound by digest.

    The prompt's text is stored beside the ledger under its digest, where the worker reads it.
    """

    name = "TaskPlanned"
    schema_version = 2
    task_id: Id
    run_id: Id
    title: Text
    prompt_sha256: Sha256 | None
    prompt_chars: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]


class WorktreeRequested(Event):
    """Intent: give the task its own worktree, on branch ``docket/<run>/<task>`` at the run's base commit."""

    name = "WorktreeRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    task_id: Id
    repository: RepositoryPath  # the git common dir
    path: AbsolutePath
    branch: BranchName
    base: Commit


class WorktreeRequestedV2(WorktreeRequested):
    """Intent: give the task its own worktree on host (its DOCKET_HOST): only a docket on that host makes it, and
    only there are its generations launched."""

    schema_version = 2
    host: Host


class WorktreeLost(Event):
    """The task's worktree (or its pending intent, path None) is out of reach: it is on host, which stopped renewing
    its leases until they expired. What was not pinned there is given up; the next generation makes a worktree on
    the host that takes the task over."""

    name = "WorktreeLost"
    run_id: Id
    task_id: Id
    path: AbsolutePath | None
    host: Host
    reason: Text


class WorktreeCreated(Event):
    """Outcome: the worktree is there, on its branch; made now, or found already made (observed)."""

    name = "WorktreeCreated"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    task_id: Id
    path: AbsolutePath
    branch: BranchName
    head: Commit
    result: Literal["created", "observed"]


class WorktreeFailed(Event):
    """Outcome: the worktree cannot be made: something else is at its path or on its branch (code says what)."""

    name = "WorktreeFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    task_id: Id
    code: Code
    message: Text


class WorktreePrepared(Event):
    """The worktree's ``[worktree]`` setup commands ran and its included files were copied (fact)."""

    name = "WorktreePrepared"
    run_id: Id
    task_id: Id
    path: AbsolutePath
    setup_commands: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    included: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096)]], Field(max_length=10_000)]
    failed: Code | None  # None: every setup command exited 0
    message: Text | None


class WorktreeRemovalRequested(Event):
    """Intent: remove the task's worktree and its branch, whose content the ledger proves is preserved.

    preserved_by says how: a candidate with the worktree's captured tree on its
    HEAD (binding_id names it) whose work its ref keeps (``worktree remove``) or
    the target's history holds (``gc``), or nothing changed against the run's base.
    The removal is a compare-and-swap from head: a worktree or branch that moved
    since is left alone.
    """

    name = "WorktreeRemovalRequested"
    effect_role = "intent"
    intent_id: Id
    run_id: Id
    task_id: Id
    repository: RepositoryPath
    path: AbsolutePath
    branch: BranchName
    head: Commit
    tree: Commit  # the worktree's capture when the removal was decided
    preserved_by: Literal["candidate", "unchanged"]
    binding_id: Sha256 | None


class WorktreeRemoved(Event):
    """Outcome: the task's worktree and branch are gone; removed now, or found gone (observed)."""

    name = "WorktreeRemoved"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    task_id: Id
    path: AbsolutePath
    result: Literal["removed", "observed"]


class WorktreeRemovalFailed(Event):
    """Outcome: the worktree or its branch moved since the removal was decided; nothing was removed."""

    name = "WorktreeRemovalFailed"
    effect_role = "outcome"
    intent_id: Id
    run_id: Id
    task_id: Id
    code: Code
    message: Text


class TaskFeedbackRecorded(Event):
    """A generation's work on the task was judged and failed (code says how: its check failed, the agent failed
    or timed out, it changed nothing, ...). The feedback goes into the next generation's prompt; each one
    recorded spends one of the task's cycles."""

    name = "TaskFeedbackRecorded"
    task_id: Id
    run_id: Id
    generation: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
    code: Code
    check: Id | None
    binding_id: Sha256 | None
    feedback: Text


class TaskAnswered(Event):
    """A generation ended while its questions waited for a person, and they are answered now: the next generation
    goes on where it left off, with each question and its answer in its prompt (note). It spends no cycle."""

    name = "TaskAnswered"
    task_id: Id
    run_id: Id
    generation: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
    request_keys: Annotated[list[Annotated[str, StringConstraints(pattern=r"^req-[a-z2-7]{16}$")]],
                            Field(min_length=1, max_length=100)]
    note: Text


class TaskFinished(Event):
    """The task is done with: passed (its candidate passed every required check and was handed off) or failed
    (its cycles are spent, or what it depends on failed)."""

    name = "TaskFinished"
    task_id: Id
    run_id: Id
    result: Literal["passed", "failed"]
    cycles: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    binding_id: Sha256 | None
    code: Code | None
    message: Text | None
