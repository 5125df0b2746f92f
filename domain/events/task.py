"""Events of the Task aggregate (stream ``task:<task_id>``): its plan and its worktree."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..values import MAX_SAFE_INT
from .base import AbsolutePath, BranchName, Code, Commit, Event, Id, RepositoryPath, Sha256, Text

__all__ = ["TaskPlanned", "TaskPlannedV2", "WorktreeCreated", "WorktreeFailed", "WorktreePrepared",
           "WorktreeRequested"]


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
