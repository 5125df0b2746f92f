"""When a lock file in a git directory is a killed writer's, and the ones docket may remove.

dulwich writes a ref or a loose object through ``<path>.lock`` (create-only), renaming it into place at the end; a
process SIGKILLed before the rename leaves the lock behind for good. Only two kinds of lock are docket's to break:
a ref's under ``refs/docket/`` (or a task branch docket made), which only docket writes, and a loose object's under
``objects/``, whose bytes are fixed by its name (whoever writes it writes the same bytes, so removing a dead
writer's lock and writing again changes nothing anyone can see). Each is held for milliseconds, so one older than
STALE_LOCK_SECONDS is a dead writer's. Every other lock (a branch users share, packed-refs, the index, config)
belongs to git and its users and is never broken. This module is the one home of that rule.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["STALE_LOCK_SECONDS", "is_stale", "remove_if_stale", "stale_locks"]

STALE_LOCK_SECONDS = 10.0
_DOCKET_REF_FOLDERS = (("refs", "docket"), ("refs", "heads", "docket"))


def is_stale(lock: Path) -> bool:
    """Whether lock is older than STALE_LOCK_SECONDS (False when it is gone or younger: a clock set back only makes a
    lock look younger, and a young one is left alone)."""
    try:
        age = time.time() - lock.lstat().st_mtime
    except OSError:
        return False
    return age >= STALE_LOCK_SECONDS


def remove_if_stale(lock: Path) -> bool:
    """Remove lock if it is stale; whether it is gone now (removed, or its writer finished or gave up meanwhile)."""
    if not os.path.lexists(lock):
        return True
    if not is_stale(lock):
        return False
    try:
        lock.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def stale_locks(common: Path) -> list[Path]:
    """The stale locks docket may remove in the git directory common: loose objects' and docket's refs', sorted."""
    found: list[Path] = []
    objects = common / "objects"
    try:
        folders = [f for f in os.scandir(objects) if len(f.name) == 2 and f.is_dir(follow_symlinks=False)]
    except OSError:
        folders = []
    for folder in folders:
        try:
            found += [Path(e.path) for e in os.scandir(folder.path)
                      if e.name.endswith(".lock") and is_stale(Path(e.path))]
        except OSError:
            continue
    for parts in _DOCKET_REF_FOLDERS:
        top = common.joinpath(*parts)
        for walked, _dirs, files in os.walk(top):  # os.walk follows no symlinked folder
            found += [Path(walked) / name for name in files if name.endswith(".lock") and is_stale(Path(walked) / name)]
    return sorted(set(found))
