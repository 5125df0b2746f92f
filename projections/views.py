"""The views database: every read model's tables plus the position they reflect.

Rows are applied in ledger order, and each batch is written together with the
new position (and the ledger digest at that position) in one transaction, so a
crash leaves the views at some exact position and replaying the rest is safe.
Rebuilding from position 1 yields identical rows: handlers read only the event.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from . import (approvals, candidates, checks, integration_steps, integrations, intents, leases, run_events, runs, tasks,
               workers)

__all__ = ["EVENT_INDEXES", "READ_MODELS", "Views", "schema_signature"]

READ_MODELS = (runs, tasks, workers, leases, intents, candidates, checks, integrations, integration_steps, approvals)
EVENT_INDEXES = (run_events,)  # tables that map to ledger positions: kept with the views, not read models
META = "projection_position"

Row = tuple[int, str, int, str, bytes]  # position, stream, version, type, state
Handler = Callable[[sqlite3.Connection, int, str, dict[str, Any]], None]


@cache
def _handlers() -> dict[str, list[Handler]]:
    """Each event type's handlers, gathered on the first apply (read models name types by their event classes)."""
    by_type: dict[str, list[Handler]] = {}
    for model in READ_MODELS:
        for type_, handler in (model.handlers() if hasattr(model, "handlers") else {}).items():
            by_type.setdefault(type_, []).append(handler)
    return by_type


def schema_signature() -> str:
    """Changes whenever a read model's table changes: the views are then rebuilt."""
    spec: list[object] = [(m.TABLE, m.PK, [(k, v.__name__) for k, v in m.COLUMNS.items()]) for m in READ_MODELS]
    spec += [index.CREATE for index in EVENT_INDEXES]
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]


def _rollback_quietly(c: sqlite3.Connection) -> None:
    """Roll back, keeping the error that led here: SQLite may already have rolled back
    (a full disk does), and "cannot rollback" must not replace "database or disk is full"."""
    try:
        c.execute("ROLLBACK")
    except sqlite3.Error:
        pass


class Views:
    def __init__(self, conn: sqlite3.Connection, path: str | None = None):
        self.conn = conn
        self.path = path  # the views file (None: in memory)

    # Schema --------------------------------------------------------------
    def ensure_schema(self, *, reset: bool = False) -> None:
        """Create the tables; drop and recreate them all if the schema changed (or reset)."""
        signature = schema_signature()
        if not reset and self._meta_value("schema") == signature:
            return
        from sqlite_utils import Database  # only the write path pays for this import

        db = Database(self.conn)
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            if reset or self._meta_value("schema") != signature:
                for name in [*(m.TABLE for m in (*READ_MODELS, *EVENT_INDEXES)), META]:
                    c.execute(f"DROP TABLE IF EXISTS [{name}]")
                for model in READ_MODELS:
                    c.execute(db.create_table_sql(model.TABLE, model.COLUMNS, pk=model.PK))
                    for column in getattr(model, "INDEXES", ()):
                        c.execute(f"CREATE INDEX [idx_{model.TABLE}_{column}] ON [{model.TABLE}] ([{column}])")
                for index in EVENT_INDEXES:
                    c.execute(index.CREATE)
                c.execute(db.create_table_sql(META, {"key": str, "value": str}, pk="key"))
                self._set_meta({"schema": signature, "position": "0", "digest": "", "genesis": ""})
            c.execute("COMMIT")
        except BaseException:
            _rollback_quietly(c)
            raise

    def _meta_value(self, key: str) -> str | None:
        try:
            row = self.conn.execute(f"SELECT value FROM {META} WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else row[0]

    def _set_meta(self, values: dict[str, str]) -> None:
        self.conn.executemany(f"INSERT OR REPLACE INTO {META} (key, value) VALUES (?, ?)", values.items())

    # Position ------------------------------------------------------------
    def position(self) -> int:
        return int(self._meta_value("position") or 0)

    def digest(self) -> str:
        return self._meta_value("digest") or ""

    def head(self) -> tuple[int, str]:
        """(position, digest) read together: another process moving the views between two reads cannot tear them."""
        try:
            rows = dict(self.conn.execute(f"SELECT key, value FROM {META} WHERE key IN ('position', 'digest')"))
        except sqlite3.OperationalError:
            return 0, ""
        return int(rows.get("position") or 0), rows.get("digest") or ""

    def genesis(self) -> str:
        """The ledger digest at position 1: which ledger these views belong to."""
        return self._meta_value("genesis") or ""

    # Applying ------------------------------------------------------------
    def apply(self, rows: Iterable[Row], digest_at: Callable[[int], str], before_commit: Callable[[], None] = lambda: None) -> int:
        """Apply rows past the current position in one transaction; returns the new position.

        ``digest_at(position)`` gives the ledger digest recorded with the last row
        (and, from position 1, the ledger's genesis digest), so a later reader can
        tell whose views these are and whether that ledger still holds their head.
        """
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            position = self.position()
            start = position
            # in-memory views answer one 'status --at'; only the views file is asked for a run's events
            run_index: list[tuple[str, int]] | None = [] if self.path is not None else None
            for position_, stream, _version, type_, state in rows:
                if position_ <= start:
                    continue
                body = json.loads(state)
                payload, at = body["payload"], body["recorded_at"]
                for handler in _handlers().get(type_, ()):
                    handler(c, position_, at, payload)
                intents.apply_any(c, position_, stream, type_, at, payload)
                if run_index is not None:
                    run_index += run_events.entries(position_, stream, payload)
                position = position_
            if run_index:
                run_events.insert(c, run_index)
            if position != start:
                self._set_meta({"position": str(position), "digest": digest_at(position)}
                               | ({"genesis": digest_at(1)} if start == 0 else {}))
            before_commit()
            c.execute("COMMIT")
        except BaseException:
            _rollback_quietly(c)
            raise
        return position

    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of a table in primary-key order (for comparing two views)."""
        return self.conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
