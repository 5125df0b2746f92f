"""Plain read-only access to the ledger file: the fast path for verify, log and views.

SqliteLedgerReader is the application's LedgerReader port (adapters/service_layer/kernel/ports.py)
over an SQLite connection; its primitives are in ledger_rows.py. Only the
standard library and the pure chain types: no eventsourcing, no pydantic, so
read-only commands start fast.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

from ....domain.kernel.chain import ChainBreak, ChainHead, ChainRow
from .ledger_rows import (CHAIN_TABLE, MAX_SAFE_POSITION, MERKLE_NODES_TABLE, Row, has_stream, head_position,
                          last_event_and_chain_end, missing_tables, orphan_digest_after, read_chain_rows, read_events,
                          read_events_at, read_only)
from .storage_errors import ledger_failure

__all__ = ["SqliteLedgerReader", "ledger_reader"]

F = TypeVar("F", bound=Callable[..., Any])


def translated(method: F) -> F:
    """A reader method whose SQLite errors leave it as docket's (storage_errors.ledger_failure)."""
    @wraps(method)
    def calling(self: SqliteLedgerReader, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise ledger_failure(self.conn, e) from e

    return calling  # type: ignore[return-value]

class SqliteLedgerReader:
    """The LedgerReader port over a connection to an SQLite ledger file (see adapters/service_layer/kernel/ports.py).

    SQLite's errors leave it as StorageFailed, except from chain_rows and chain_digests, which verify reads
    millions of rows through without a Python step per row (an error there reaches the CLI's last resort).
    """

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def chain_rows(self, *, after: int = 0, until: int | None = None) -> Iterator[ChainRow]:
        return read_chain_rows(self.conn, after=after, until=until)

    def events(self, *, after: int = 0, until: int | None = None, topics: Sequence[str] = ()) -> Iterator[Row]:
        try:
            yield from read_events(self.conn, after=after, until=until, topics=topics)
        except sqlite3.Error as e:
            raise ledger_failure(self.conn, e) from e

    def events_at(self, positions: Iterable[int]) -> Iterator[Row]:
        try:
            yield from read_events_at(self.conn, positions)
        except sqlite3.Error as e:
            raise ledger_failure(self.conn, e) from e

    @translated
    def event_at(self, position: int) -> Row | None:
        return self.conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                                 "WHERE rowid = ?", (position,)).fetchone()

    @translated
    def head_position(self) -> int:
        return head_position(self.conn)

    @translated
    def chain_head(self) -> ChainHead | None:
        row = self.conn.execute(f"SELECT position, digest FROM {CHAIN_TABLE} ORDER BY position DESC LIMIT 1").fetchone()
        return None if row is None else ChainHead(*row)

    @translated
    def digest_at(self, position: int) -> str:
        row = self.conn.execute(f"SELECT digest FROM {CHAIN_TABLE} WHERE position = ?", (position,)).fetchone()
        return "" if row is None else row[0]

    def verify_chain(self, *, anchor: ChainHead | None = None, until: int | None = None,
                     progress: Callable[[int], None] | None = None) -> tuple[ChainHead, ChainBreak | None]:
        """The chain verified (domain.chain.verify_chain), in parts in child processes, each opening the file itself,
        when that is worth it (chain_parts.py)."""
        from .chain_parts import verify_chain_in_parts

        return verify_chain_in_parts(self.conn, anchor=anchor, until=until, progress=progress)

    def chain_digests(self, *, after: int = 0, until: int | None = None) -> Iterator[bytes]:
        last = MAX_SAFE_POSITION if until is None else until
        rows = self.conn.execute(f"SELECT digest FROM {CHAIN_TABLE} WHERE position > ? AND position <= ? "
                                 "ORDER BY position", (after, last))
        return (bytes.fromhex(digest) for (digest,) in rows)

    @translated
    def merkle_nodes(self, height: int, count: int) -> dict[int, bytes]:
        """The kept hashes of nodes 0..count-1 of that height whose last position still has the digest they
        were kept with (a node of another or a rewritten ledger is not used); none before the store made the table."""
        try:
            rows = self.conn.execute(
                f"SELECT m.node, m.hash FROM {MERKLE_NODES_TABLE} m JOIN {CHAIN_TABLE} h "
                "ON h.position = (m.node + 1) << m.height AND h.digest = m.digest "
                "WHERE m.height = ? AND m.node < ?", (height, count)).fetchall()
        except sqlite3.OperationalError:  # no such table: a ledger no docket of this version has written
            return {}
        return dict(rows)

    @translated
    def last_event_and_chain_end(self) -> tuple[int, int]:
        return last_event_and_chain_end(self.conn)

    @translated
    def orphan_digest_after(self, position: int) -> int | None:
        return orphan_digest_after(self.conn, position)

    @translated
    def missing_tables(self) -> list[str]:
        return missing_tables(self.conn)

    @translated
    def has_stream(self, stream: str) -> bool:
        return has_stream(self.conn, stream)

    @translated
    def check_schema(self) -> None:
        from .schema_check import check_schema

        check_schema(self.conn)


@contextmanager
def ledger_reader(path: Path) -> Iterator[SqliteLedgerReader]:
    """The ledger file at path read through the reader port, over a read-only connection."""
    with read_only(path) as conn:
        yield SqliteLedgerReader(conn)
