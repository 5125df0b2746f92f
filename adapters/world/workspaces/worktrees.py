"""Task workspaces: a repository of its own per task, on the task's branch at its base, observed and created.

A task's workspace lives at ``<root>/workspaces/<repository key>/<run>/<task>`` (paths.py: root is [workspace]
root, else docket's data folder), outside the user's repository: its own ``.git`` folder (HEAD, refs, index,
config, empty hooks) that borrows the user's objects read-only (own_repositories.py). The task's branch lives in
the workspace, not in the user's repository. It is made whole or not at all, only from absent; its parents are
made 0700 and never followed through a symlink.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ....domain.effects import WorktreeObservation
from ..git.change_watch import watch_workspace
from ..git.own_repositories import borrows_from, make_own_repository, read_own_repository
from ..git.repository import is_commit, make_parents, making_worktrees, open_repo, read_text, ref_tip, unsafe_parent

__all__ = ["anchor_of", "create_worktree", "observe_worktree"]


def anchor_of(path: Path) -> Path:
    """The folder docket's places hang from: ``<root>`` of ``<root>/<kind>/<key>/<run>/<name>`` (for an execution,
    ``<root>/executions/<key>/<run>/<binding>/<name>``, one folder more: see executions.py)."""
    return path.parents[3] if len(path.parents) > 3 else path.parent


def observe_worktree(repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
    """What is at a task's workspace path, compared with the branch and base it should have. Never raises."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return WorktreeObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            with making_worktrees(Path(repository), exclusive=False):
                return _observe(repo, Path(repository), Path(path), branch, base)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            return WorktreeObservation("unreadable", detail=f"cannot read {path} or {repository}: {e}")


def create_worktree(repository: Path, path: Path, branch: str, base: str) -> None:
    """Make the task's workspace at path, on its branch at base, only from absent.

    Any other state of the world is left as it is (observe again to learn it).
    I/O failures that are no state of the world (disk full, permission denied
    while writing) propagate, after the staging folder is removed.
    """
    from dulwich.errors import NotGitRepository

    repository, path = Path(repository), Path(path)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return
    with repo:
        with making_worktrees(repository, exclusive=True):
            if _observe(repo, repository, path, branch, base).state != "absent":
                return
            anchor = anchor_of(path)
            anchor.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data folder (or [workspace] root)
            if not make_parents(anchor, path.parent):
                return
            for leftover in path.parent.glob(f".{path.name}.*.partial"):
                shutil.rmtree(leftover, ignore_errors=True)
            if make_own_repository(repository, path, head=f"ref: refs/heads/{branch}", commit=base, branch=branch):
                watch_workspace(path, base)  # before any agent runs in it: its pins look only at what changed


def _observe(repo, common: Path, path: Path, branch: str, base: str) -> WorktreeObservation:  # noqa: ANN001
    def diverged(detail: str) -> WorktreeObservation:
        return WorktreeObservation("diverged", detail=detail)

    unsafe = unsafe_parent(anchor_of(path), path)
    if unsafe is not None:
        return diverged(f"{unsafe}, a parent of {path}, is a symlink or not a directory (not followed)")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not is_commit(repo, base):  # e.g. a dependency's merge a prune took before the workspace held it
            return WorktreeObservation("unreadable", detail=f"base {base} is not a commit in {common} (yet)")
        return WorktreeObservation("absent")
    if stat.S_ISLNK(st.st_mode):
        return diverged(f"{path} is a symlink to {os.readlink(path)} (not followed)")
    if not stat.S_ISDIR(st.st_mode):
        return diverged(f"{path} is a file, not a workspace")
    own = read_own_repository(path)
    if own is None:
        if read_text(path / ".git") is not None:
            return diverged(f"{path} is a linked worktree, not a workspace of its own")
        return diverged(f"{path} is a directory that is not a git workspace")
    if not borrows_from(own, common):
        return diverged(f"{path} is a workspace of another repository (it borrows objects from "
                        f"{', '.join(own.alternates) or 'nowhere'})")
    ref = f"refs/heads/{branch}"
    if own.head != f"ref: {ref}":
        on = (f"branch {own.head[len('ref: refs/heads/'):]}" if own.head and own.head.startswith("ref: refs/heads/")
              else f"detached HEAD {own.head}")
        return diverged(f"the workspace at {path} is on {on}, not on branch {branch}")
    with open_repo(path) as workspace:
        tip = ref_tip(workspace, ref)
    if tip is None:
        return diverged(f"branch {branch} is missing in its workspace at {path}")
    return WorktreeObservation("present", head=tip)
