"""The views database: every read model's tables plus the position they reflect.

Rows are applied in ledger order, and each batch is written together with the
new position (and the ledger digest at that position) in one transaction, so a
crash leaves the views at some exact position and replaying the rest is safe.
Rebuilding from position 1 yields identical rows: handlers read only the event.
SQLite's errors leave Views, and the functions that open it, as StorageFailed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from ..domain.kernel.errors import StorageFailed, translating
from . import approvals, candidates, checks, inbox, integration_steps, integrations, intents, leases, run_events, runs, tasks, usage, workers
import time

__all__ = ["EVENT_INDEXES", "READ_MODELS", "Views", "connect_views", "open_read_only", "schema_signature"]

READ_MODELS = (runs, tasks, workers, leases, intents, candidates, checks, integrations, integration_steps, approvals,
               inbox, usage)
EVENT_INDEXES = (run_events,)  # tables that map to ledger positions: kept with the views, not read models
META = "projection_position"

Row = tuple[int, str, int, str, bytes]  # position, stream, version, type, state
Handler = Callable[[sqlite3.Connection, int, str, dict[str, Any]], None]
translated = translating(sqlite3.Error)
_CHECKPOINT_TABLES = [m.TABLE for m in READ_MODELS] + [META]


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
    @translated
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
    @translated
    def position(self) -> int:
        return int(self._meta_value("position") or 0)

    @translated
    def digest(self) -> str:
        return self._meta_value("digest") or ""

    @translated
    def head(self) -> tuple[int, str]:
        """(position, digest) read together: another process moving the views between two reads cannot tear them."""
        try:
            rows = dict(self.conn.execute(f"SELECT key, value FROM {META} WHERE key IN ('position', 'digest')"))
        except sqlite3.OperationalError:
            return 0, ""
        return int(rows.get("position") or 0), rows.get("digest") or ""

    @translated
    def genesis(self) -> str:
        """The ledger digest at position 1: which ledger these views belong to."""
        return self._meta_value("genesis") or ""

    # Applying ------------------------------------------------------------
    @translated
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

    @translated
    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of a table in primary-key order (for comparing two views)."""
        return self.conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()

    @translated
    def run_positions(self, run_id: str, *, until: int) -> list[int]:
        """The run's ledger positions up to until, in ledger order (the run_events index)."""
        return list(run_events.positions_of(self.conn, run_id, until=until))

    @translated
    def meta(self) -> dict[str, str]:
        """The position table (schema, position, digest, genesis); StorageFailed if there is none."""
        return dict(self.conn.execute(f"SELECT key, value FROM {META}").fetchall())

    # Checkpoints (adapters/service_layer/kernel/checkpoints.py) -----------------
    @translated
    def copy_read_models_into(self, path: str) -> int:
        """Copy the read models and the position, as they stand now, into a new database file; returns the position."""
        c = self.conn
        c.execute("ATTACH DATABASE ? AS checkpoint", (path,))
        try:
            c.execute("BEGIN")
            try:
                position = self.position()
                for table in _CHECKPOINT_TABLES:
                    c.execute(f"CREATE TABLE checkpoint.[{table}] AS SELECT * FROM main.[{table}]")
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        finally:
            c.execute("DETACH DATABASE checkpoint")
        return position

    def restore_read_models_from(self, path: str, accept: Callable[[dict[str, str]], bool]) -> bool:
        """Replace the read models with the copy in path, if accept(its position table); False when it is not
        accepted or cannot be read."""
        c = self.conn
        try:
            c.execute("ATTACH DATABASE ? AS checkpoint", (path,))
        except sqlite3.Error:
            return False
        try:
            if not accept(dict(c.execute(f"SELECT key, value FROM checkpoint.[{META}]").fetchall())):
                return False
            c.execute("BEGIN")
            try:
                for table in _CHECKPOINT_TABLES:
                    c.execute(f"DELETE FROM main.[{table}]")
                    c.execute(f"INSERT INTO main.[{table}] SELECT * FROM checkpoint.[{table}]")
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            return True
        except (sqlite3.Error, StorageFailed):  # StorageFailed: from accept, reading the ledger
            return False
        finally:
            c.execute("DETACH DATABASE checkpoint")


@translated
def connect_views(name: str, timeout: float) -> Views:
    """The views database name (":memory:" for views in memory) with every read model's tables.

    ``timeout``: seconds to wait for another process's lock on the views (DOCKET_LOCK_TIMEOUT).
    """
    conn = sqlite3.connect(name, isolation_level=None, timeout=timeout)
    try:
        if name != ":memory:":
            _write_ahead(conn, timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        views = Views(conn, None if name == ":memory:" else name)
        views.ensure_schema()
    except BaseException:
        conn.close()
        raise
    return views


def _write_ahead(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the views file in WAL mode. Processes opening a new file at once race on the switch, and SQLite answers
    "database is locked" at once there, without waiting on the busy timeout: asked again until timeout."""

    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def open_read_only(path: str) -> Views | None:
    """The views file, read-only, as it is (no schema is made); None if it cannot be opened."""
    try:
        return Views(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30))
    except sqlite3.Error:
        return None
