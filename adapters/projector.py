"""Keeps views.sqlite caught up with the ledger, and rebuilds it from scratch."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ..projections.views import Views
from . import faults
from .files import create_private_file
from .reader import read_events

__all__ = ["catch_up", "digest_at", "open_views"]

BATCH = 5000


def open_views(path: Path | str) -> Views:
    """Open (creating if needed) a views database with every read model's tables.

    Views are disposable: a file that is not an SQLite database at all is
    removed and built again from the ledger.
    """
    if str(path) == ":memory:":
        return _open(":memory:")
    path = Path(path)
    create_private_file(path)
    try:
        return _open(str(path))
    except sqlite3.DatabaseError as e:
        if "not a database" not in str(e) and "malformed" not in str(e):
            raise
        for damaged in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            damaged.unlink(missing_ok=True)
        create_private_file(path)
        return _open(str(path))


def _open(name: str) -> Views:
    conn = sqlite3.connect(name, isolation_level=None, timeout=60)
    try:
        if name != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        views = Views(conn)
        views.ensure_schema()
    except BaseException:
        conn.close()
        raise
    return views


def digest_at(ledger: sqlite3.Connection, position: int) -> str:
    row = ledger.execute("SELECT digest FROM chain WHERE position = ?", (position,)).fetchone()
    return "" if row is None else row[0]


def catch_up(
    ledger: sqlite3.Connection,
    views: Views,
    *,
    until: int | None = None,
    until_time: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Apply every ledger event the views have not seen (up to until), in batches.

    Views that do not belong to this ledger (their position is past the head, or
    the digest they recorded differs from the ledger's) are rebuilt from scratch.
    """
    position = views.position()
    if position and digest_at(ledger, position) != views.digest():
        views.ensure_schema(reset=True)
        position = 0
    while True:
        batch = []
        for row in read_events(ledger, after=position, until=until):
            if until_time is not None and _recorded_at(row[4]) > until_time:
                until = row[0] - 1
                break
            batch.append(row)
            if len(batch) == BATCH:
                break
        if not batch:
            return views.position()
        position = views.apply(batch, lambda p: digest_at(ledger, p),
                               before_commit=lambda: faults.crash_point("projection:before-commit"))
        if progress:
            progress(position)


def _recorded_at(state: bytes) -> str:
    import json

    return json.loads(state)["recorded_at"]
