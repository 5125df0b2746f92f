"""The WorkspacePort: where work happens, a task's workspace (worktrees.py, with [worktree] include: includes.py) and
a check's execution (executions.py), each a repository of its own (own_repositories.py); and agent_roots, the
folders an agent's git needs there (what the sandbox lets it write and read)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ....domain.effects import ExecutionInspection, ExecutionObservation, WorktreeObservation
from .executions import create_execution, execution_remnants, inspect_execution, observe_execution, remove_execution
from .includes import copy_includes
from ..git.repository import DulwichRepository
from .worktrees import create_worktree, observe_worktree
from ..git.own_repositories import alternates_of

__all__ = ["DulwichWorkspaces", "agent_roots"]


def agent_roots(repository: Path, workspace: Path) -> tuple[list[Path], list[Path]]:
    """(write roots, read roots) an agent's git needs in its workspace: it writes only the workspace (its git dir is
    inside it), and reads the objects it borrows: the user's object folder (repository is the git common dir), and
    the folders that one borrows from in turn (its own alternates, followed a few levels, as git does)."""

    reads: list[Path] = []
    pending, seen = [Path(repository) / "objects"], set[str]()
    while pending and len(seen) < 5:  # git follows alternates 5 deep
        objects = pending.pop()
        key = os.path.realpath(objects)
        if key in seen:
            continue
        seen.add(key)
        reads.append(Path(key))
        pending.extend(Path(objects, p) if not os.path.isabs(p) else Path(p)
                       for p in alternates_of(Path(objects).parent))
    return [Path(workspace)], reads


class DulwichWorkspaces(DulwichRepository):
    """Task worktrees and executions over repositories on disk, made in-process with dulwich."""

    def observe_worktree(self, repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
        return observe_worktree(repository, path, branch, base)

    def create_worktree(self, repository: Path, path: Path, branch: str, base: str) -> None:
        create_worktree(repository, path, branch, base)

    def copy_includes(self, source_root: Path, worktree: Path, patterns: Sequence[str], *,
                      skipped: list[str] | None = None) -> list[str]:
        return copy_includes(source_root, worktree, patterns, skipped=skipped)

    def observe_execution(self, repository: Path, path: Path, commit: str) -> ExecutionObservation:
        return observe_execution(repository, path, commit)

    def create_execution(self, repository: Path, path: Path, commit: str) -> None:
        create_execution(repository, path, commit)

    def inspect_execution(self, repository: Path, path: Path, commit: str) -> ExecutionInspection:
        return inspect_execution(repository, path, commit)

    def execution_remnants(self, repository: Path, path: Path) -> bool:
        return execution_remnants(repository, path)

    def remove_execution(self, repository: Path, path: Path, *, group_alive: bool) -> None:
        remove_execution(repository, path, group_alive=group_alive)
