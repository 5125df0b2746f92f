"""The checkout that has the target branch out: is it clean at a commit, and moving its index and files to another.

This is the one place docket runs the git command line: dulwich has no
two-tree merge of a worktree that refuses when a local change is in the way,
and git's ``read-tree -m -u`` is exactly that (what ``receive.denyCurrentBranch
= updateInstead`` runs, after refreshing the index). Observing uses git too, so
that "clean" means what ``git status`` says, with the same stat cache, ignore
rules. git runs inert (inert_git.py): no filter, hook, fsmonitor or other
program the repository's config names runs, and it gets none of docket's
environment. Observing takes no lock (GIT_OPTIONAL_LOCKS=0): it never writes
the index. Submodules are compared by the commit they have out, never entered
(entering one would run a git that reads the submodule's own config).

Untracked files follow git's own rule: they are in the way only where the move
writes. One blocks when it sits at a path the incoming tree adds, at a path the
incoming tree needs as a folder, or inside a folder the incoming tree replaces
with a file; ignored files are expendable there, as git treats them (``git
merge`` and ``read-tree -m -u`` overwrite them). Everywhere else (docket.toml
before it is committed, a tasks file, a .venv/) they stay and block nothing.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from ....domain.containment.processes import output_text
from ....domain.merge_queue.target_move import CheckoutObservation
from .inert_git import InertGit, inert_git

__all__ = ["observe_checkout", "update_checkout"]

MAX_CHANGES = 5  # local changes named in an observation (the refusal's message)
OBSERVE_TIMEOUT_SECONDS = 600


class _Unreadable(Exception):
    pass


def observe_checkout(worktree: Path, old: str, new: str) -> CheckoutObservation:
    """at-old when the worktree's index is old's tree, its tracked files match the index and no untracked file is in
    the way of the move to new; else at-new when its index is new's tree and its tracked files match; else dirty,
    naming its first local changes (staged ones against old) or the untracked paths in the way; unreadable when git
    cannot say. Never raises."""
    try:
        with inert_git(worktree) as git:
            # the tracked files against the index (stat data refreshed in memory); untracked ones are looked at below
            entries = _paths(git, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=no",
                             "--ignore-submodules=dirty")
            unstaged = [e[3:] for e in entries if e[1] != " "]
            staged = _paths(git, "diff-index", "--cached", "--name-only", "-z", old, "--")
            if not unstaged and not staged:
                in_the_way = _in_the_way(git, worktree, old, new)
                if not in_the_way:
                    return CheckoutObservation("at-old")
                return _dirty(in_the_way)
            if not unstaged and not _paths(git, "diff-index", "--cached", "--name-only", "-z", new, "--"):
                return CheckoutObservation("at-new")
    except _Unreadable as e:
        return CheckoutObservation("unreadable", detail=str(e))
    except OSError as e:
        return CheckoutObservation("unreadable", detail=f"git cannot run in {worktree}: {e}")
    return _dirty([f"staged {p}" for p in staged] + [f"unstaged {p}" for p in unstaged])


def _dirty(changes: list[str]) -> CheckoutObservation:
    more = len(changes) - MAX_CHANGES
    return CheckoutObservation("dirty", tuple(changes[:MAX_CHANGES]) + ((f"{more} more",) if more > 0 else ()))


def _in_the_way(git: InertGit, worktree: Path, old: str, new: str) -> list[str]:
    """The untracked, not ignored paths that moving the worktree from old's tree to new's would overwrite or remove,
    as git names them: "untracked a.txt" (at a path new adds, or one it needs as a folder), "untracked files in d/"
    (a folder where new writes a file)."""
    if old == new:
        return []
    listed = _paths(git, "diff-tree", "-r", "-z", "--no-renames", "--name-status", old, new, "--")
    changed = list(zip(listed[::2], listed[1::2]))
    leaving = {path for status, path in changed if status == "D"}  # old's files the move removes first
    files: set[str] = set()
    folders: set[str] = set()
    kinds: dict[str, str | None] = {}

    def kind(path: str) -> str | None:
        if path not in kinds:
            try:
                mode = (worktree / path).lstat().st_mode
                kinds[path] = "folder" if stat.S_ISDIR(mode) else "file"
            except FileNotFoundError:
                kinds[path] = None
            except OSError as e:
                raise _Unreadable(f"cannot look at {worktree / path}: {e}") from None
        return kinds[path]

    for path in (path for status, path in changed if status == "A"):
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            leading = "/".join(parts[:depth])
            found = kind(leading)
            if found is None or leading in leaving:
                break  # nothing there, or old's own file, which the move removes
            if depth == len(parts):
                (folders if found == "folder" else files).add(leading)
            elif found == "file":
                files.add(leading)  # a file (or a symlink) where new needs a folder
                break
    if not files and not folders:
        return []
    # of those, what git counts: untracked and not ignored, with its own ignore rules
    untracked = set()
    wanted = sorted(files | folders)
    for start in range(0, len(wanted), 1000):
        untracked.update(_paths(git, "--literal-pathspecs", "ls-files", "-z", "--others", "--exclude-standard",
                                "--", *wanted[start:start + 1000]))
    blocked = [f"untracked {path}" for path in sorted(files) if path in untracked]
    blocked += [f"untracked files in {folder}/" for folder in sorted(folders)
                if any(p.startswith(folder + "/") for p in untracked)]
    return sorted(blocked, key=_named)


def _named(change: str) -> str:
    return change.removeprefix("untracked ").removeprefix("files in ")


def update_checkout(worktree: Path, old: str, new: str) -> None:
    """Move the worktree's index and files from old's tree to new's (``git read-tree -m -u old new``, after
    refreshing the index's stat data as updateInstead does), only while they are clean at old; git refuses,
    changing nothing, when a local change is in the way. Reports nothing: observe again to learn the outcome."""
    if observe_checkout(worktree, old, new).state != "at-old":
        return
    try:
        with inert_git(worktree) as git:
            for command in (["update-index", "-q", "--ignore-submodules", "--refresh"],
                            ["read-tree", "-m", "-u", old, new]):
                git.run(*command)
    except OSError:
        return


def _paths(git: InertGit, *args: str) -> list[str]:
    try:
        done = git.run(*args, timeout=OBSERVE_TIMEOUT_SECONDS, extra_env={"GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _Unreadable(f"git {args[0]} in {git.cwd}: {e}") from None
    if done.returncode != 0:
        reason = output_text(done.stderr).strip().splitlines()  # may name the agent's files
        raise _Unreadable(f"git {args[0]} in {git.cwd} exited {done.returncode}"
                          + (f": {reason[-1]}" if reason else ""))
    return [os.fsdecode(p) for p in done.stdout.split(b"\0") if p]
