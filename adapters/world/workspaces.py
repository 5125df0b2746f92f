"""The WorkspacePort: where work happens, a task's worktree (worktrees.py, with [worktree] include: includes.py) and a
check's execution (executions.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...domain.effects import ExecutionInspection, ExecutionObservation, WorktreeObservation
from .executions import create_execution, execution_remnants, inspect_execution, observe_execution, remove_execution
from .includes import copy_includes
from .repository import DulwichRepository
from .worktrees import create_worktree, observe_worktree

__all__ = ["DulwichWorkspaces", "agent_roots"]


def agent_roots(repository: Path, workspace: Path) -> tuple[list[Path], list[Path]]:
    """(write roots, read roots) an agent's git needs beyond its workspace, for its sandbox.

    A stand-in while workspaces are linked worktrees of the user's repository
    (repository: its git common folder): ``git add`` and ``git commit`` there
    write the worktree's admin folder (index, HEAD, logs) and the common
    objects, refs and reflogs, and read the common config, packed refs, info
    and hooks. Never the common folder as a whole: docket's own folder (the
    ledger, logs, keys' receipts) is in it.
    """
    write = [workspace]
    dot_git = workspace / ".git"
    try:
        text = dot_git.read_text(encoding="utf-8") if dot_git.is_file() else ""
    except OSError:
        text = ""
    if text.startswith("gitdir:"):
        admin = Path(text.removeprefix("gitdir:").strip())
        write.append((admin if admin.is_absolute() else workspace / admin).resolve())
    write += [repository / "objects", repository / "refs", repository / "logs"]
    read = [repository / name for name in ("config", "config.worktree", "packed-refs", "info", "hooks", "HEAD",
                                           "shallow", "commondir")]
    return write, read


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
