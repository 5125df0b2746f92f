"""Index: which ledger positions belong to a run, so `docket log --run` reads only those.

An event belongs to run R when its payload's run_id is R or it is on the stream
``run:R`` (what `docket log --run` has always matched); one event can belong to
two runs. Not a read model: status never shows it, and checkpoints leave it out.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ..domain.kernel import streams

TABLE = "run_events"
CREATE = f"CREATE TABLE {TABLE} (run_id TEXT NOT NULL, position INTEGER NOT NULL, PRIMARY KEY (run_id, position)) " \
         "WITHOUT ROWID"
RUN_STREAM_PREFIX = streams.RUN_PREFIX


def entries(position: int, stream: str, p: dict[str, Any]) -> list[tuple[str, int]]:
    """(run_id, position) for each run the event belongs to."""
    run_id = p.get("run_id")
    found = [(run_id, position)] if isinstance(run_id, str) else []
    if stream.startswith(RUN_STREAM_PREFIX) and stream[len(RUN_STREAM_PREFIX):] != run_id:
        found.append((stream[len(RUN_STREAM_PREFIX):], position))
    return found


def insert(c: sqlite3.Connection, rows: list[tuple[str, int]]) -> None:
    c.executemany(f"INSERT OR IGNORE INTO {TABLE} (run_id, position) VALUES (?, ?)", rows)


def positions_of(c: sqlite3.Connection, run_id: str, *, until: int) -> Iterator[int]:
    """The run's positions up to until, in ledger order."""
    cursor = c.execute(f"SELECT position FROM {TABLE} WHERE run_id = ? AND position <= ? ORDER BY position",
                       (run_id, until))
    while batch := cursor.fetchmany(2000):
        yield from (row[0] for row in batch)
