"""The LedgerReader port over a PostgreSQL ledger (adapters/service_layer/kernel/ports.py): what reader.py is for a file.

psycopg alone, no eventsourcing and no pydantic. Statements run on an autocommit connection, each seeing what was
committed when it began, as a read of the SQLite file does; the chain's long reads go through a server-side cursor,
a thousand rows at a time, so verifying a million events never holds them all.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from ....domain.kernel.chain import ChainBreak, ChainHead, ChainRow, verify_chain
from ....domain.kernel.errors import StorageFailed, VerificationFailed
from .ledger_rows import CHAIN_TABLE, LEDGER_TABLES, MAX_SAFE_POSITION, MERKLE_NODES_TABLE, Row
from .database_url import postgres_env, redacted
from .postgres_store import EVENTS_TABLE
from ....domain.kernel.codes import Code
from .database_outage import waiting_out

__all__ = ["PostgresLedgerReader", "postgres_reader"]

_EVENT_COLUMNS = "notification_id, originator_id, originator_version, topic, state"
# what docket's recorder creates in its schema (postgres_store.py); verify names anything else
EXPECTED_TABLES = frozenset({EVENTS_TABLE, CHAIN_TABLE, "tracking", "snapshots", MERKLE_NODES_TABLE})


def _stream_name(originator_id: Any) -> str:
    """A stream's name as the chain holds it: docket's are text; a uuid column's ids are chained by their hex."""
    return originator_id if isinstance(originator_id, str) else originator_id.hex


def _row(r: tuple[Any, ...]) -> Row:
    return r[0], _stream_name(r[1]), r[2], r[3], bytes(r[4])


class PostgresLedgerReader:
    """The LedgerReader port over a connection to a PostgreSQL ledger. psycopg's errors leave it as StorageFailed."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = "public", where: str = "",
                 reconnect: Callable[[], psycopg.Connection[Any]] | None = None):
        self.conn = conn
        self.reconnect = reconnect  # a new connection, when the server dropped this one (a restart, an outage)
        self.schema = schema
        self.where = where
        quote = lambda name: f'"{schema}"."{name}"'  # noqa: E731  (a schema name was checked by postgres_env's URL)
        self.events_sql, self.chain_sql, self.merkle_sql = quote(EVENTS_TABLE), quote(CHAIN_TABLE), quote(
            MERKLE_NODES_TABLE)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            try:
                return self.conn.execute(sql, params).fetchall()
            except psycopg.OperationalError:
                if self.reconnect is None or not (self.conn.broken or self.conn.closed):
                    raise
            self.conn.close()  # dropped by the server: a read is safe to ask again, on a new connection
            self.conn = self.reconnect()
            return self.conn.execute(sql, params).fetchall()
        except psycopg.Error as e:
            raise StorageFailed(f"{self.where}: {e}".strip()) from e

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    def _stream(self, sql: str, params: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
        """Rows of a long read through a server-side cursor, in a read-only transaction of their own."""
        try:
            from .database_outage import waiting_out

            parameters: dict[str, Any] = {**self.conn.info.get_parameters(),
                                          "password": self.conn.info.password or None}
            with waiting_out(lambda: psycopg.connect(**parameters, row_factory=tuple_row),
                             lambda e: isinstance(e, psycopg.OperationalError), self.where) as conn:
                conn.read_only = True
                with conn.transaction(), conn.cursor(name="docket_read") as cursor:
                    cursor.itersize = 2000
                    cursor.execute(sql, params)
                    yield from cursor
        except psycopg.Error as e:
            raise StorageFailed(f"{self.where}: {e}".strip()) from e

    def chain_rows(self, *, after: int = 0, until: int | None = None) -> Generator[ChainRow, None, None]:
        sql = (f"SELECT e.notification_id, e.originator_id, e.originator_version, e.topic, e.state, c.digest "
               f"FROM {self.events_sql} e LEFT JOIN {self.chain_sql} c ON c.position = e.notification_id "
               "WHERE e.notification_id > %s AND e.notification_id <= %s ORDER BY e.notification_id")
        for r in self._stream(sql, (after, MAX_SAFE_POSITION if until is None else until)):
            yield r[0], _stream_name(r[1]), r[2], r[3], bytes(r[4]), r[5]  # type: ignore[misc]

    def events(self, *, after: int = 0, until: int | None = None, topics: Sequence[str] = ()) -> Iterator[Row]:
        sql = (f"SELECT {_EVENT_COLUMNS} FROM {self.events_sql} WHERE notification_id > %s AND notification_id <= %s"
               + (" AND topic = ANY(%s)" if topics else "") + " ORDER BY notification_id")
        params: list[Any] = [after, MAX_SAFE_POSITION if until is None else until]
        if topics:
            params.append(list(topics))
        return (_row(r) for r in self._stream(sql, params))

    def events_at(self, positions: Iterable[int]) -> Iterator[Row]:
        positions = iter(positions)
        while chunk := list(islice(positions, 1000)):
            yield from (_row(r) for r in self._all(
                f"SELECT {_EVENT_COLUMNS} FROM {self.events_sql} WHERE notification_id = ANY(%s) "
                "ORDER BY notification_id", (chunk,)))

    def event_at(self, position: int) -> Row | None:
        r = self._one(f"SELECT {_EVENT_COLUMNS} FROM {self.events_sql} WHERE notification_id = %s", (position,))
        return None if r is None else _row(r)

    def head_position(self) -> int:
        r = self._one(f"SELECT MAX(notification_id) FROM {self.events_sql}")
        return (r[0] if r else 0) or 0

    def chain_head(self) -> ChainHead | None:
        r = self._one(f"SELECT position, digest FROM {self.chain_sql} ORDER BY position DESC LIMIT 1")
        return None if r is None else ChainHead(r[0], r[1])

    def digest_at(self, position: int) -> str:
        r = self._one(f"SELECT digest FROM {self.chain_sql} WHERE position = %s", (position,))
        return "" if r is None else r[0]

    def verify_chain(self, *, anchor: ChainHead | None = None, until: int | None = None,
                     progress: Callable[[int], None] | None = None) -> tuple[ChainHead, ChainBreak | None]:
        """The chain verified in one pass over the server-side cursor (domain.chain.verify_chain)."""
        rows = self.chain_rows(until=until)
        try:
            return verify_chain(_counted(rows, progress) if progress is not None else rows, anchor=anchor)
        finally:
            rows.close()  # a break ends the read early: its cursor and connection go now, not when collected

    def chain_digests(self, *, after: int = 0, until: int | None = None) -> Iterator[bytes]:
        sql = f"SELECT digest FROM {self.chain_sql} WHERE position > %s AND position <= %s ORDER BY position"
        return (bytes.fromhex(r[0]) for r in self._stream(sql, (after, MAX_SAFE_POSITION if until is None else until)))

    def merkle_nodes(self, height: int, count: int) -> dict[int, bytes]:
        rows = self._all(
            f"SELECT m.node, m.hash FROM {self.merkle_sql} m JOIN {self.chain_sql} h "
            "ON h.position = (m.node + 1) << m.height AND h.digest = m.digest WHERE m.height = %s AND m.node < %s",
            (height, count))
        return {node: bytes(hash_) for node, hash_ in rows}

    def last_event_and_chain_end(self) -> tuple[int, int]:
        r = self._one(f"SELECT (SELECT MAX(notification_id) FROM {self.events_sql}), "
                      f"(SELECT MAX(position) FROM {self.chain_sql})")
        return (r[0] or 0, r[1] or 0) if r else (0, 0)

    def orphan_digest_after(self, position: int) -> int | None:
        r = self._one(f"SELECT MIN(position) FROM {self.chain_sql} WHERE position > %s", (position,))
        return None if r is None else r[0]

    def missing_tables(self) -> list[str]:
        present = {r[0] for r in self._all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,))}
        return [name for name in LEDGER_TABLES if name not in present]

    def has_stream(self, stream: str) -> bool:
        return self._one(f"SELECT 1 FROM {self.events_sql} WHERE originator_id = %s LIMIT 1", (stream,)) is not None

    def check_schema(self) -> None:
        """Raise VerificationFailed naming each object in the ledger's schema that docket's recorder did not make:
        a table, a view, a trigger or a rule (a trigger can rewrite what is inserted, a rule what is read), or a
        row-level policy."""
        problems = [f"unexpected table {name}" for (name,) in self._all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY table_name",
            (self.schema,)) if name not in EXPECTED_TABLES]
        problems += [f"unexpected trigger {name} on {table}" for name, table in self._all(
            "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT t.tgisinternal "
            "ORDER BY t.tgname", (self.schema,))]
        problems += [f"unexpected rule {name} on {table}" for name, table in self._all(
            "SELECT rulename, tablename FROM pg_rules WHERE schemaname = %s ORDER BY rulename", (self.schema,))]
        problems += [f"unexpected policy {name} on {table}" for name, table in self._all(
            "SELECT policyname, tablename FROM pg_policies WHERE schemaname = %s ORDER BY policyname",
            (self.schema,))]
        if problems:
            raise VerificationFailed(Code.SCHEMA_MISMATCH, f"the ledger holds what docket did not create: "
                                                        f"{'; '.join(problems)}")


def _counted(rows: Iterable[Any], progress: Callable[[int], None]) -> Iterator[Any]:
    for n, row in enumerate(rows, start=1):
        if n % 10_000 == 0:
            progress(n)
        yield row


@contextmanager
def postgres_reader(url: str) -> Iterator[PostgresLedgerReader]:
    """The PostgreSQL ledger at url read through the reader port, over an autocommit, read-only connection."""
    env = postgres_env(url, lock_timeout=0)

    def connect() -> psycopg.Connection[Any]:
        conn = psycopg.connect(dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                               user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"] or None,
                               connect_timeout=int(env["POSTGRES_CONNECT_TIMEOUT"]), autocommit=True,
                               row_factory=tuple_row)
        conn.execute("SET default_transaction_read_only = on")  # every statement of a reader, not only in transactions
        return conn

    def reconnect() -> psycopg.Connection[Any]:
        return waiting_out(connect, lambda e: isinstance(e, psycopg.OperationalError), redacted(url))

    try:
        conn = connect()
    except psycopg.Error as e:
        raise StorageFailed(f"cannot reach the ledger's database {redacted(url)}: {e}".strip()) from e
    reader = PostgresLedgerReader(conn, env["POSTGRES_SCHEMA"] or "public", redacted(url), reconnect)
    try:
        yield reader
    finally:
        reader.conn.close()
