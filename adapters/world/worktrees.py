"""Task worktrees: a task's branch made at its base and checked out in a linked worktree, observed and created.

A task's worktree lives at ``<git common dir>/docket/worktrees/<run>/<task>`` on the branch docket names for it;
it is made whole or not at all (repository.py), only from absent or branch-only.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ...domain.effects import WorktreeObservation
from .paths import main_worktree
from .repository import (
    admin_entries,
    check_out_branch,
    is_commit,
    make_parents,
    making_worktrees,
    open_repo,
    read_text,
    ref_tip,
    same,
    unsafe_parent,
)

__all__ = ["create_worktree", "observe_worktree"]


def observe_worktree(repository: Path, path: Path, branch: str, base: str) -> WorktreeObservation:
    """What is at a task's worktree path, compared with the branch and base it should have. Never raises."""
    from dulwich.errors import NotGitRepository

    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError) as e:
        return WorktreeObservation("unreadable", detail=f"cannot open repository {repository}: {e}")
    with repo:
        try:
            with making_worktrees(Path(repository), exclusive=False):
                return _observe(repo, Path(repository), Path(path), branch, base)
        except (OSError, UnicodeDecodeError) as e:
            return WorktreeObservation("unreadable", detail=f"cannot read {path} or {repository}: {e}")


def create_worktree(repository: Path, path: Path, branch: str, base: str) -> None:
    """Make the task's branch at base (create-only) and its linked worktree at path, only from absent or branch-only.

    Any other state of the world is left as it is (observe again to learn it).
    I/O failures that are no state of the world (disk full, permission denied
    while writing) propagate, after the staging folder and the new admin entry are removed.
    """
    from dulwich.errors import NotGitRepository

    repository, path = Path(repository), Path(path)
    try:
        repo = open_repo(repository)
    except (NotGitRepository, OSError):
        return
    with repo:
        with making_worktrees(repository, exclusive=True):
            _create(repo, repository, path, branch, base)


def _create(repo, repository: Path, path: Path, branch: str, base: str) -> None:  # noqa: ANN001
    observed = _observe(repo, repository, path, branch, base)
    if observed.state not in ("absent", "branch-only"):
        return
    ref = f"refs/heads/{branch}"
    from .ref_locks import write_ref

    added: list[bool] = []
    if not write_ref(repo, ref, lambda: added.append(repo.refs.add_if_new(ref.encode(), base.encode()))):
        return  # a fresh lock on the branch (another git process now): observing again says what became of it
    if not added[0] and ref_tip(repo, ref) != base:
        return
    if not make_parents(repository, path.parent):
        return
    for entry in admin_entries(repository):
        if entry.checkout is not None and same(entry.checkout, path):
            shutil.rmtree(entry.folder)  # left by an interrupted creation (observed as branch-only above)
    for leftover in path.parent.glob(f".{path.name}.*.partial"):
        shutil.rmtree(leftover, ignore_errors=True)
    check_out_branch(repository, path, ref)


def _observe(repo, common: Path, path: Path, branch: str, base: str) -> WorktreeObservation:  # noqa: ANN001
    ref = f"refs/heads/{branch}"
    tip = ref_tip(repo, ref)
    entries = admin_entries(common)
    holders = [str(e.checkout) for e in entries
               if e.head == f"ref: {ref}" and e.checkout is not None and not same(e.checkout, path)]
    main = main_worktree(common)
    if main is not None and read_text(common / "HEAD") == f"ref: {ref}":
        holders.append(f"the main checkout {main}")

    def diverged(detail: str) -> WorktreeObservation:
        return WorktreeObservation("diverged", detail=detail)

    unsafe = unsafe_parent(common, path)
    if unsafe is not None:
        return diverged(f"{unsafe}, a parent of {path}, is a symlink or not a directory (not followed)")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is None:
        stale = [e for e in entries if e.checkout is not None and same(e.checkout, path)]
        if stale and (tip != base or holders or any(e.head != f"ref: {ref}" for e in stale)):
            return diverged(f"stale worktree entry {stale[0].folder} names {path}, which does not exist")
        if tip is None:
            if not is_commit(repo, base):
                return diverged(f"base {base} is not a commit in {common}")
            return WorktreeObservation("absent")
        if tip != base:
            return diverged(f"branch {branch} is at {tip}, not at the base {base}, and {path} has no worktree")
        if holders:
            return diverged(f"branch {branch} is checked out at {holders[0]}")
        return WorktreeObservation("branch-only")
    if stat.S_ISLNK(st.st_mode):
        return diverged(f"{path} is a symlink to {os.readlink(path)} (not followed)")
    if not stat.S_ISDIR(st.st_mode):
        return diverged(f"{path} is a file, not a worktree")
    dot_git = path / ".git"
    try:
        git_st = os.lstat(dot_git)
    except FileNotFoundError:
        return diverged(f"{path} is a directory that is not a git worktree")
    if stat.S_ISDIR(git_st.st_mode):
        return diverged(f"{path} is a repository of its own, not a linked worktree")
    text = read_text(dot_git) if stat.S_ISREG(git_st.st_mode) else None
    if text is None or not text.startswith("gitdir:"):
        return diverged(f"{dot_git} is not a 'gitdir:' file")
    admin = path / text[len("gitdir:"):].strip()
    if not same(admin.parent, common / "worktrees"):
        return diverged(f"{path} is a worktree of another repository (gitdir {admin})")
    entry = next((e for e in entries if e.folder.name == admin.name), None)
    if entry is None:
        return diverged(f"{path} names worktree entry {admin}, which does not exist")
    if entry.checkout is None or not same(entry.checkout, path):
        return diverged(f"worktree entry {admin} names {entry.checkout}, not {path}")
    if entry.head != f"ref: {ref}":
        on = (f"branch {entry.head[len('ref: refs/heads/'):]}" if entry.head and entry.head.startswith("ref: ")
              else f"detached HEAD {entry.head}")
        return diverged(f"the worktree at {path} is on {on}, not on branch {branch}")
    if tip is None:
        return diverged(f"branch {branch} is missing but its worktree exists at {path}")
    if holders:
        return diverged(f"branch {branch} is also checked out at {holders[0]}")
    return WorktreeObservation("present", head=tip)

