"""Ref writes that survive a docket process SIGKILLed in the middle of one.

dulwich changes a ref by creating ``<ref>.lock`` (create-only), writing the new
value into it and renaming it over the ref. A process killed before the rename
leaves the lock behind for good: the ref still holds its old value (the rename
is what changes it), but every later write finds the lock and raises
FileLocked. Git itself then refuses until someone removes the lock by hand.

Under ``refs/docket/`` only docket writes, each write holding its lock for
milliseconds, so a lock there older than STALE_LOCK_SECONDS is a killed
writer's (adapters/world/stale_locks.py): it is removed and the compare-and-swap tried once more. Elsewhere
(branches users and their tools share) a lock is never broken. Either way a
write that still finds a lock does nothing: the caller observes again, as
after any act.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .stale_locks import STALE_LOCK_SECONDS, remove_if_stale

__all__ = ["STALE_LOCK_SECONDS", "write_ref"]

DOCKET_REFS = "refs/docket/"
TASK_BRANCHES = "refs/heads/docket/"  # the branches docket makes for its task worktrees (docket/RUN/TASK)


def write_ref(repo: Any, ref: str, write: Callable[[], Any]) -> bool:
    """Run write (one dulwich compare-and-swap of ref); False when a lock kept it from running."""
    from dulwich.file import FileLocked

    _reflog_folder(repo, ref)
    try:
        _through_vanishing_folders(repo, ref, write)
        return True
    except FileLocked as locked:
        if not _stale_docket_lock(repo, ref, locked):
            return False
    try:
        _through_vanishing_folders(repo, ref, write)
        return True
    except FileLocked:
        return False


def _through_vanishing_folders(repo: Any, ref: str, write: Callable[[], Any], tries: int = 5) -> None:
    """write, again when a folder on the ref's way vanished as dulwich made it (``git pack-refs``, run by ``git gc``,
    removes the ref folders it empties)."""
    for _ in range(tries - 1):
        try:
            write()
            return
        except FileNotFoundError:
            _reflog_folder(repo, ref)
    write()


def _reflog_folder(repo: Any, ref: str) -> None:
    """Make the folder of the ref's reflog first: dulwich makes it with os.mkdir after checking it is missing, so two
    writers (threads or processes) making the first ref under one folder at once fail with FileExistsError, after
    the ref itself was written."""
    try:
        path = repo._reflog_path(ref.encode("utf-8"))
    except (AttributeError, TypeError, ValueError):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)


def _stale_docket_lock(repo: Any, ref: str, locked: Any) -> bool:
    """Remove the ref's own lock when it is docket's and older than STALE_LOCK_SECONDS; whether it was removed."""
    if not ref.startswith(DOCKET_REFS) and not ref.startswith(TASK_BRANCHES):
        return False
    lock = Path(os.fsdecode(locked.lockfilename))
    expected = Path(os.fsdecode(repo.refs.path)) / (ref + ".lock")
    if lock != expected:  # e.g. packed-refs.lock: shared with every git process, never broken
        return False
    return remove_if_stale(lock)  # gone meanwhile (its writer finished or gave up) also means: try again
