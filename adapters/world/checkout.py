"""The checkout that has the target branch out: is it clean at a commit, and moving its index and files to another.

This is the one place docket runs the git command line: dulwich has no
two-tree merge of a worktree that refuses when a local change is in the way,
and git's ``read-tree -m -u`` is exactly that (what ``receive.denyCurrentBranch
= updateInstead`` runs). Observing uses git too, so that "clean" means what
``git status`` says, with the same stat cache, ignore rules and filters. No
hook runs (read-tree runs none; fsmonitor is switched off) and observing takes
no lock (GIT_OPTIONAL_LOCKS=0): it never writes the index.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ...domain.integration import CheckoutObservation

__all__ = ["observe_checkout", "update_checkout"]

MAX_CHANGES = 5  # local changes named in an observation (the refusal's message)
OBSERVE_TIMEOUT_SECONDS = 600
# What git itself clears before working in another repository (environment.c, local_repo_env): any of them,
# inherited from a caller, would point these commands at another repository, index or object store.
_REPOSITORY_ENV = ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
                   "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
                   "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
                   "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR")


class _Unreadable(Exception):
    pass


def observe_checkout(worktree: Path, old: str, new: str) -> CheckoutObservation:
    """at-old when the worktree's index is old's tree and its files match the index with no untracked file that is
    not ignored; else at-new likewise for new; else dirty, naming its first local changes (staged ones against
    old); unreadable when git cannot say. Never raises."""
    try:
        # status: the files against the index (stat data refreshed in memory) and untracked files not ignored
        entries = _paths(worktree, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=normal",
                         "--ignore-submodules=none")
        unstaged = [e[3:] for e in entries if e[:2] != "??" and e[1] != " "]
        untracked = [e[3:] for e in entries if e[:2] == "??"]
        staged = _paths(worktree, "diff-index", "--cached", "--name-only", "-z", old, "--")
        if not unstaged and not untracked:
            if not staged:
                return CheckoutObservation("at-old")
            if not _paths(worktree, "diff-index", "--cached", "--name-only", "-z", new, "--"):
                return CheckoutObservation("at-new")
    except _Unreadable as e:
        return CheckoutObservation("unreadable", detail=str(e))
    changes = ([f"staged {p}" for p in staged] + [f"unstaged {p}" for p in unstaged]
               + [f"untracked {p}" for p in untracked])
    more = len(changes) - MAX_CHANGES
    return CheckoutObservation("dirty", tuple(changes[:MAX_CHANGES]) + ((f"{more} more",) if more > 0 else ()))


def update_checkout(worktree: Path, old: str, new: str) -> None:
    """Move the worktree's index and files from old's tree to new's (``git read-tree -m -u old new``), only while
    they are clean at old; git refuses, changing nothing, when a local change is in the way. Reports nothing:
    observe again to learn the outcome."""
    if observe_checkout(worktree, old, new).state != "at-old":
        return
    try:
        subprocess.run(["git", "-c", "core.fsmonitor=false", "read-tree", "-m", "-u", old, new], cwd=worktree,
                       env=_environment(), stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError:
        return


def _paths(worktree: Path, *args: str) -> list[str]:
    try:
        done = subprocess.run(["git", "-c", "core.fsmonitor=false", "-c", "core.quotepath=false", *args],
                              cwd=worktree, env={**_environment(), "GIT_OPTIONAL_LOCKS": "0"},
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=OBSERVE_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _Unreadable(f"git {args[0]} in {worktree}: {e}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _Unreadable(f"git {args[0]} in {worktree} exited {done.returncode}"
                          + (f": {reason[-1]}" if reason else ""))
    return [os.fsdecode(p) for p in done.stdout.split(b"\0") if p]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _REPOSITORY_ENV}
