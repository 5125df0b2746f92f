"""The ledger's write lock among the threads of one process: they queue here, and the one that commits hands it on.

SQLite's own lock (BEGIN IMMEDIATE) is what keeps processes apart; a connection that finds it taken sleeps in
SQLite's busy handler, in steps growing to 100 ms, and notices the release only when its sleep ends. docket go's
threads (each task's, the merge queue's, the main loop's) write the same ledger through their own connections: each
takes this lock first, so a thread waiting for another thread's transaction wakes when it ends. The lock is
reentrant, so a thread that nests a second connection's transaction meets SQLite's timeout as before, not a
deadlock of its own.
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["writer_lock"]

_locks: dict[str, threading.RLock] = {}
_guard = threading.Lock()


def writer_lock(datastore: Any) -> threading.RLock:
    """The in-process write lock of the database the datastore opens (one per file, however it is named)."""
    name = str(getattr(datastore.pool, "db_name", "") or getattr(datastore, "db_name", ""))
    memory = not name or ":memory:" in name or "mode=memory" in name
    key = f"memory:{id(datastore)}" if memory else os.path.realpath(name.removeprefix("file:").split("?")[0])
    with _guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock
