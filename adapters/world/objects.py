"""Writing git objects when other processes may write the same ones at the same moment.

dulwich writes a loose object under a lock file; a second process writing the
same object at the same moment (two pins of one worktree, two captures) finds
the lock and raises FileLocked, and a writer SIGKILLed mid-write leaves its lock
behind for good. An object's bytes are fixed by its id, so the loser writes its
own temporary file and links it into place, never replacing anything.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

__all__ = ["add_object"]


def add_object(store: Any, obj: Any) -> bytes:
    """Store obj (if not there yet) in the repository's object store; its id."""
    from dulwich.file import FileLocked

    if obj.id in store:
        return obj.id
    try:
        store.add_object(obj)
    except FileLocked:
        _link_into_place(store, obj)
    return obj.id


def _link_into_place(store: Any, obj: Any) -> None:
    hex_id = obj.id.decode("ascii")
    folder = os.path.join(store.path, hex_id[:2])
    path = os.path.join(folder, hex_id[2:])
    os.makedirs(folder, exist_ok=True)
    draft = f"{path}.docket-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(obj.as_legacy_object())
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # the other writer finished first: the same bytes
    finally:
        os.unlink(draft)
