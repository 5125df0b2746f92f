"""The ledger file's tables read row by row, read-only: the primitives of the reader (reader.py), of verify in
parts (chain_parts.py) and of the ledger file's checks (files.py).

Only the standard library and the pure chain types: no eventsourcing, no pydantic, so read-only commands start
fast.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, islice
from pathlib import Path
from typing import Any

from ....domain.kernel.chain import ChainHead, ChainRow
from urllib.parse import quote
import re

__all__ = ['CHAIN_TABLE', 'DEFAULT_LOCK_TIMEOUT', 'LEDGER_TABLES', 'MAX_SAFE_POSITION', 'MERKLE_BLOCK_HEIGHT', 'MERKLE_NODES_TABLE', 'Row', 'chain_head', 'connect_read_only', 'digest_at', 'first_undecodable', 'has_stream', 'head_position', 'is_on_read_only_filesystem', 'last_event_and_chain_end', 'missing_tables', 'orphan_digest_after', 'read_chain_rows', 'read_events', 'read_events_at', 'read_only', 'state_at', 'undecodable_column']

Row = tuple[int, str, int, str, bytes]  # position, stream, version, type, state

CHAIN_TABLE = "chain"
MERKLE_NODES_TABLE = "merkle_nodes"  # made by the store (adapters/world/ledger/store.py), which says what it holds
MERKLE_BLOCK_HEIGHT = 10  # the store keeps the Merkle hash of each complete block of 2**10 positions
LEDGER_TABLES = ("stored_events", CHAIN_TABLE, "tracking")
DEFAULT_LOCK_TIMEOUT = 60  # seconds to wait for the ledger's write lock; here, where a read-only command finds it cheaply


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain read-only connection: the fast path for verify, log and projections."""
    conn = connect_read_only(path)
    try:
        yield conn
    finally:
        conn.close()


def connect_read_only(path: Path, timeout: float = 30) -> sqlite3.Connection:
    """Open an SQLite file for reading; on a read-only filesystem, as immutable.

    Nobody can write a file on a read-only mount, and SQLite could not create
    the lock file (-shm) it needs beside a WAL database there. But an immutable
    open ignores the -wal file: when one with committed pages was left behind
    (a crash), SQLite reads it without immutable, using the -shm left with it.
    """

    uri = f"file:{quote(os.fsencode(path))}?mode=ro"  # bytes: a path need not be UTF-8
    if is_on_read_only_filesystem(path) and not _has_wal_pages(path):
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, timeout=timeout)


def _has_wal_pages(path: Path) -> bool:
    try:
        return os.stat(f"{path}-wal").st_size > 0
    except OSError:
        return False


def is_on_read_only_filesystem(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def missing_tables(conn: sqlite3.Connection) -> list[str]:
    """docket's ledger tables that are not in the file (a damaged ledger)."""
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [name for name in LEDGER_TABLES if name not in present]


def read_chain_rows(conn: sqlite3.Connection, *, after: int = 0, until: int | None = None) -> Iterator[ChainRow]:
    """Every stored event with the digest stored beside it (None if missing), in position order.

    Rows come as plain tuples in ChainRow's field order: no object per row. They are fetched a
    thousand at a time and handed on without a Python step per row: verify then costs about 10 %
    less CPU than when rows are fetched one by one or passed through a generator.
    """
    sql = (
        "SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, c.digest "
        f"FROM stored_events e LEFT JOIN {CHAIN_TABLE} c ON c.position = e.rowid WHERE e.rowid > ?"
    )
    params: list[int] = [after]
    if until is not None:
        sql += " AND e.rowid <= ?"
        params.append(until)
    cursor = conn.cursor()
    cursor.arraysize = 1000
    cursor.execute(sql + " ORDER BY e.rowid", params)
    return chain.from_iterable(iter(cursor.fetchmany, []))


def read_events(conn: sqlite3.Connection, *, after: int = 0, until: int | None = None,
                topics: Sequence[str] = ()) -> Iterator[Row]:
    """Raw (position, stream, version, type, state) rows in position order."""
    sql = "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events WHERE rowid > ?"
    params: list[Any] = [after]
    if until is not None:
        sql += " AND rowid <= ?"
        params.append(until)
    if topics:
        sql += f" AND topic IN ({','.join('?' * len(topics))})"
        params.extend(topics)
    cursor = conn.execute(sql + " ORDER BY rowid", params)
    while batch := cursor.fetchmany(2000):
        yield from batch


def read_events_at(conn: sqlite3.Connection, positions: Iterable[int]) -> Iterator[Row]:
    """Raw (position, stream, version, type, state) rows at the given positions (ascending), in that order."""
    sql = "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events WHERE rowid IN ({}) " \
          "ORDER BY rowid"
    positions = iter(positions)
    while chunk := list(islice(positions, 500)):
        # a list, not the cursor: closing this generator after the connection must not close a cursor on it
        yield from conn.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()


def last_event_and_chain_end(conn: sqlite3.Connection) -> tuple[int, int]:
    """The last event's position and the chain's last position: equal in an undamaged ledger."""
    last_event, chain_end = conn.execute(
        f"SELECT (SELECT MAX(rowid) FROM stored_events), (SELECT MAX(position) FROM {CHAIN_TABLE})").fetchone()
    return last_event or 0, chain_end or 0


def chain_head(conn: sqlite3.Connection) -> ChainHead | None:
    """The chain's last position and its digest (None: no chain yet)."""
    row = conn.execute(f"SELECT position, digest FROM {CHAIN_TABLE} ORDER BY position DESC LIMIT 1").fetchone()
    return None if row is None else ChainHead(*row)


def digest_at(conn: sqlite3.Connection, position: int) -> str | None:
    row = conn.execute(f"SELECT digest FROM {CHAIN_TABLE} WHERE position = ?", (position,)).fetchone()
    return None if row is None else row[0]


def state_at(conn: sqlite3.Connection, position: int) -> bytes | None:
    """The stored state (the event's exact bytes) at position."""
    row = conn.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()
    return None if row is None else row[0]


def has_stream(conn: sqlite3.Connection, stream: str) -> bool:
    return conn.execute("SELECT 1 FROM stored_events WHERE originator_id = ?", (stream,)).fetchone() is not None


def head_position(conn: sqlite3.Connection) -> int:
    try:
        return conn.execute("SELECT MAX(rowid) FROM stored_events").fetchone()[0] or 0
    except sqlite3.OperationalError:
        return 0


def orphan_digest_after(conn: sqlite3.Connection, position: int) -> int | None:
    """A digest recorded past the last event means events were cut from the tail."""
    return conn.execute(f"SELECT MIN(position) FROM {CHAIN_TABLE} WHERE position > ?", (position,)).fetchone()[0]


MAX_SAFE_POSITION = 2**53 - 1


def undecodable_column(error: BaseException) -> str | None:
    """The column named by SQLite's "Could not decode to UTF-8 column ..." (text in the file that is not UTF-8: only
    an edit outside docket makes it), or None for any other error."""

    found = re.match(r"Could not decode to UTF-8 column '([^']*)'", str(error))
    return found.group(1) if found else None


_TEXT_COLUMNS = {"originator_id": "stream", "topic": "type", "state": "state", "digest": "digest"}


def first_undecodable(conn: sqlite3.Connection, *, after: int = 0, until: int | None = None
                      ) -> tuple[int, str] | None:
    """The first position (after, until] whose stored stream, type, state or digest is text that is not UTF-8, and
    which of them (read as bytes: the slow path, only once reading as text has failed)."""
    last = MAX_SAFE_POSITION if until is None else until

    def first(sql: str, columns: tuple[str, ...]) -> tuple[int, str] | None:
        for position, *values in conn.execute(sql, (after, last)):
            for column, value in zip(columns, values):
                try:
                    if value is not None:
                        bytes(value).decode("utf-8")
                except UnicodeDecodeError:
                    return position, _TEXT_COLUMNS[column]
        return None

    def as_bytes(column: str) -> str:
        return f"CASE WHEN typeof({column}) = 'text' THEN CAST({column} AS BLOB) END"

    found = [first(f"SELECT rowid, {as_bytes('originator_id')}, {as_bytes('topic')}, {as_bytes('state')} FROM "
                   "stored_events WHERE rowid > ? AND rowid <= ? ORDER BY rowid", ("originator_id", "topic", "state")),
             first(f"SELECT position, {as_bytes('digest')} FROM {CHAIN_TABLE} WHERE position > ? AND position <= ? "
                   "ORDER BY position", ("digest",))]
    return min((f for f in found if f is not None), default=None)
