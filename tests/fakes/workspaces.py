"""The WorkspacePort's fake: task worktrees and executions over FakeRepository values."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import Path

from docket.domain.effects import ExecutionInspection, ExecutionObservation, WorktreeObservation
from docket.domain.kernel.errors import Refused
from docket.domain.kernel.names import check_include_pattern

from .repository import FakeGitPort, FakeRepository, FakeWorld

__all__ = ["FakeWorkspaces"]


class FakeWorkspaces(FakeGitPort):
    """The WorkspacePort over FakeRepository values; files are regular files, for copy_includes."""

    def __init__(self, world: FakeWorld | Mapping[str | Path, FakeRepository] | None = None):
        super().__init__(world)
        self.files: dict[Path, bytes] = {}  # regular files, for copy_includes

    def observe_worktree(self, repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
        """As a workspace of its own: its branch lives in it (modelled by repo.branches, which the workspace's
        commits move), so nothing in the user's repository (other checkouts, stale entries) bears on it."""
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return WorktreeObservation("unreadable", detail=f"cannot open repository {repository}")
        path = Path(path)

        def diverged(detail: str) -> WorktreeObservation:
            return WorktreeObservation("diverged", detail=detail)

        if path in self.occupied:
            return diverged(f"{path} is {self.occupied[path]}")
        if path not in repo.worktrees:
            return WorktreeObservation("absent") if repo.objects.get(base) == "commit" else WorktreeObservation(
                "unreadable", detail=f"base {base} is not a commit in {repository} (yet)")
        on = repo.worktrees[path]
        if on != branch:
            return diverged(f"the workspace at {path} is on {f'branch {on}' if on else 'a detached HEAD'}, "
                            f"not on branch {branch}")
        tip = repo.branches.get(branch)
        if tip is None:
            return diverged(f"branch {branch} is missing in its workspace at {path}")
        return WorktreeObservation("present", head=tip)

    def create_worktree(self, repository: Path, path: Path, branch: str, base: str) -> None:
        if self.observe_worktree(repository, path, branch, base).state != "absent":
            return
        repo = self.repositories[Path(repository)]
        repo.branches[branch] = base
        repo.stale.pop(Path(path), None)
        repo.worktrees[Path(path)] = branch

    def copy_includes(self, source_root: Path, worktree: Path, patterns: Sequence[str], *,
                      skipped: list[str] | None = None) -> list[str]:
        checked = [check_include_pattern(p) for p in patterns]
        source_root, worktree = Path(source_root), Path(worktree)
        done = []
        for source, data in sorted(self.files.items()):
            if not source.is_relative_to(source_root):
                continue
            rel = source.relative_to(source_root).as_posix()
            if not any(_matches(rel, pattern) for pattern in checked):
                continue
            existing = self.files.setdefault(worktree / rel, data)
            if existing == data:
                done.append(rel)
            elif skipped is not None:
                skipped.append(f"{rel}: a different file is already in the worktree (left alone)")
        return sorted(done)

    def observe_execution(self, repository: Path, path: Path, commit: str) -> ExecutionObservation:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return ExecutionObservation("unreadable", detail=f"cannot open repository {repository}")
        path = Path(path)
        if path in self.occupied:
            return ExecutionObservation("diverged", detail=f"{path} is {self.occupied[path]}")
        if path not in repo.worktrees:
            return ExecutionObservation("absent")
        if repo.worktrees[path] is not None or repo.detached.get(path) != commit:
            return ExecutionObservation("diverged", detail=f"the worktree at {path} is not detached at {commit}")
        unclean = sorted(repo.changed.get(path, set()) | repo.output.get(path, set()))
        if unclean:
            return ExecutionObservation("diverged", detail=f"the worktree at {path} is not clean: {unclean[0]} changed")
        return ExecutionObservation("ready")

    def create_execution(self, repository: Path, path: Path, commit: str) -> None:
        if self.observe_execution(repository, path, commit).state != "absent":
            return
        repo = self.repositories[Path(repository)]
        if repo.objects.get(commit) != "commit":
            return
        repo.worktrees[Path(path)] = None
        repo.detached[Path(path)] = commit

    def inspect_execution(self, repository: Path, path: Path, commit: str) -> ExecutionInspection:
        repo = self.repositories.get(Path(repository))
        if repo is None or not repo.readable:
            return ExecutionInspection("mutated", detail=f"cannot open repository {repository}")
        path = Path(path)
        if path in self.occupied:
            return ExecutionInspection("mutated", detail=f"{path} is {self.occupied[path]}")
        if path not in repo.worktrees:
            return ExecutionInspection("missing", detail=f"nothing at {path}")
        if repo.worktrees[path] is not None or repo.detached.get(path) != commit:
            return ExecutionInspection("mutated", detail=f"HEAD is not detached at {commit}")
        changed = sorted(repo.changed.get(path, ()))
        if changed:
            return ExecutionInspection("mutated", detail=f"tracked {changed[0]} was changed")
        return ExecutionInspection("matching")

    def execution_remnants(self, repository: Path, path: Path) -> bool:
        return False  # the fake removes an execution in one step

    def remove_execution(self, repository: Path, path: Path, *, group_alive: bool) -> None:
        if group_alive:
            raise Refused("execution-busy", f"the check running in {path} is still alive; stop its process group first")
        repo = self.repositories[Path(repository)]
        path = Path(path)
        for held in (repo.worktrees, repo.detached, repo.changed, repo.output, self.occupied):
            held.pop(path, None)


def _matches(rel: str, pattern: str) -> bool:
    """Part by part, as the real adapter matches: a pattern naming a folder takes what it holds."""
    names, parts = rel.split("/"), pattern.rstrip("/").split("/")
    return len(names) >= len(parts) and all(
        fnmatch.fnmatchcase(n, p) and (p.startswith(".") or not n.startswith(".")) for n, p in zip(names, parts))
