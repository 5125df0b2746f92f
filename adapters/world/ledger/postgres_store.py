"""The chained event store on PostgreSQL: the library's PostgreSQL process recorder plus docket's hash chain.

The same chain as on SQLite (store.py's ``ChainedRecorder``), written in the same transaction as the events it
covers, under the lock the library's recorder takes for every append (``LOCK TABLE stored_events IN EXCLUSIVE
MODE``): appends from every machine are serialised, positions have no gaps and the chain never forks. Readers are
not blocked by it. Decisions take the same lock before they read, so nothing they read changes before they append.

Positions are the library's ``notification_id`` column, given explicitly (the next after the chain's head), never
drawn from its sequence: a rolled-back append leaves no gap. The tables have SQLite's names (``stored_events``,
``chain``, ``tracking``, ``snapshots``, ``merkle_nodes``), so the two stores read alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
import psycopg.errors
from eventsourcing.persistence import Notification, ProcessRecorder, StoredEvent, Tracking
from eventsourcing.postgres import PostgresFactory, PostgresProcessRecorder
from eventsourcing.utils import Environment
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier

from .database_url import postgres_env, redacted
from .ledger_rows import CHAIN_TABLE, MERKLE_NODES_TABLE
from .store import SNAPSHOTS_TABLE, ChainedRecorder, LedgerBusy, unresolved_positions
from .database_outage import waiting_out

__all__ = ["ChainedPostgresFactory", "ChainedPostgresProcessRecorder", "postgres_env", "redacted"]

EVENTS_TABLE = "stored_events"
TRACKING_TABLE = "tracking"
_CREATE_LOCK = 0x646F636B6574  # "docket": the advisory lock that serialises creating the tables
_STATE_JSON = "convert_from(state, 'UTF8')::jsonb"


class ChainedPostgresProcessRecorder(ChainedRecorder, PostgresProcessRecorder, ProcessRecorder):
    """Chained events and a tracking position on PostgreSQL, in one transaction under the append lock.

    Cursors handed to callers return plain tuples, as SQLite's do, so the ledger's code reads both alike.
    """

    placeholder = "%s"
    position_column = "notification_id"

    def __init__(self, datastore: Any, *, events_table_name: str = EVENTS_TABLE,
                 tracking_table_name: str = TRACKING_TABLE):
        super().__init__(datastore, events_table_name=events_table_name, tracking_table_name=tracking_table_name)
        schema = self.datastore.schema
        self.qualified = {name: SQL("{}.{}").format(Identifier(schema), Identifier(name)).as_string(None)
                          for name in (events_table_name, tracking_table_name, CHAIN_TABLE, SNAPSHOTS_TABLE,
                                       MERKLE_NODES_TABLE)}
        events, chain = self.qualified[events_table_name], self.qualified[CHAIN_TABLE]
        self.events_sql, self.chain_sql = events, chain
        self.tracking_sql = self.qualified[tracking_table_name]
        self.snapshots_sql, self.merkle_sql = self.qualified[SNAPSHOTS_TABLE], self.qualified[MERKLE_NODES_TABLE]
        # eventsourcing's statements are Composed (each of these one SQL)
        self.sql_create_statements += [Composed([statement]) for statement in (
            SQL(f"CREATE TABLE IF NOT EXISTS {chain} (position bigint PRIMARY KEY, digest text NOT NULL)"),
            SQL(f"CREATE TABLE IF NOT EXISTS {self.snapshots_sql} (stream text PRIMARY KEY, version bigint NOT NULL, "
                "position bigint NOT NULL, digest text NOT NULL, state bytea NOT NULL)"),
            SQL(f"CREATE TABLE IF NOT EXISTS {self.merkle_sql} (height integer NOT NULL, node bigint NOT NULL, "
                "digest text NOT NULL, hash bytea NOT NULL, PRIMARY KEY (height, node))"),
            SQL(f"CREATE INDEX IF NOT EXISTS {events_table_name}_topic ON {events} (topic)"),
        )]
        last_digest = f"SELECT position, digest FROM {chain} ORDER BY position DESC LIMIT 1"
        self.select_heads_statement = (
            f"SELECT (SELECT position FROM ({last_digest}) a), (SELECT digest FROM ({last_digest}) b), "
            f"(SELECT MAX(notification_id) FROM {events})"
        )
        self.insert_chain_statement = f"INSERT INTO {chain} (position, digest) VALUES (%s, %s)"
        self.select_digests_statement = (
            f"SELECT digest FROM {chain} WHERE position > %s AND position <= %s ORDER BY position")
        self.insert_merkle_node_statement = (
            f"INSERT INTO {self.merkle_sql} (height, node, digest, hash) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (height, node) DO UPDATE SET digest = EXCLUDED.digest, hash = EXCLUDED.hash")
        # one statement a table for a whole append, over arrays: a statement a row was 1.6-1.8x the library's own
        # batched insert (docs/performance.md, "A ledger in PostgreSQL")
        id_type = self.datastore.originator_id_type
        self.insert_event_rows_statement = (
            f"INSERT INTO {events} (notification_id, originator_id, originator_version, topic, state) "
            f"SELECT * FROM unnest(%s::bigint[], %s::{id_type}[], %s::bigint[], %s::text[], %s::bytea[])")
        self.insert_chain_rows_statement = (
            f"INSERT INTO {chain} (position, digest) SELECT * FROM unnest(%s::bigint[], %s::text[])")

    # Tables ----------------------------------------------------------------
    def create_table(self) -> None:
        """Create every table, index and type in one transaction under an advisory lock, so any number of machines
        opening a new database at once agree; a database that has them all is found so by a read."""
        with self.read_transaction() as c:
            if self._tables_exist(c):
                return
        with self.datastore.get_connection() as conn, conn.transaction():
            c = conn.cursor(row_factory=tuple_row)
            c.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
            c.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(self.datastore.schema)))
            if not self._tables_exist(c):
                for statement in self.sql_create_statements:
                    text = statement.as_string(None)
                    if "CREATE TYPE" in text and self._type_exists(c):
                        continue
                    c.execute(statement, prepare=False)
                c.execute(f"INSERT INTO {self.tracking_sql} (application_name, notification_id) VALUES (%s, 1) "
                          "ON CONFLICT (application_name) DO NOTHING", (self.table_migration_identifier,))
        self.tracking_table_exists = True
        self.tracking_migration_previous = self.tracking_migration_current = 1
        self.datastore.register_type_adapters()

    def _tables_exist(self, c: Any) -> bool:
        wanted = [self.events_table_name, self.tracking_table_name, CHAIN_TABLE, SNAPSHOTS_TABLE, MERKLE_NODES_TABLE]
        c.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_name = ANY(%s)",
                  (self.datastore.schema, wanted))
        if len({row[0] for row in c.fetchall()}) < len(wanted):
            return False
        c.execute(f"SELECT 1 FROM {self.tracking_sql} WHERE application_name = %s", (self.table_migration_identifier,))
        return c.fetchone() is not None

    def _type_exists(self, c: Any) -> bool:
        c.execute("SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                  "WHERE n.nspname = %s AND t.typname = %s", (self.datastore.schema, self.stored_event_type_name))
        return c.fetchone() is not None

    # Transactions ----------------------------------------------------------
    def _connection(self, stack: ExitStack) -> Any:
        """A pooled connection, entered on stack; an outage of the database waited out (database_outage.py)."""
        from eventsourcing.persistence import InterfaceError, OperationalError

        return waiting_out(lambda: stack.enter_context(self.datastore.get_connection()),
                           lambda e: isinstance(e, (OperationalError, InterfaceError)), self.where)

    @property
    def where(self) -> str:
        kwargs = self.datastore.pool.kwargs
        info = kwargs if isinstance(kwargs, dict) else {}
        return f"postgresql://{info.get('host')}:{info.get('port')}/{info.get('dbname')}"

    @contextmanager
    def read_transaction(self) -> Iterator[Any]:
        """A tuple cursor in a transaction that writes nothing (one snapshot of the ledger for what it reads)."""
        with ExitStack() as stack:
            conn = self._connection(stack)
            with conn.transaction(force_rollback=True):
                yield conn.cursor(row_factory=tuple_row)

    @contextmanager
    def write_transaction(self) -> Iterator[Any]:
        """A cursor holding the append lock: what is read through it cannot change before what is written through
        it commits (decisions run here). A stream version taken raises IntegrityError, as the library's recorders
        report it; the lock not coming within the lock timeout, LedgerBusy."""
        with ExitStack() as stack:
            conn = self._connection(stack)
            stack.enter_context(conn.transaction())
            c = conn.cursor(row_factory=tuple_row)
            try:
                self._lock_table(c)
            except psycopg.errors.LockNotAvailable as e:
                raise LedgerBusy(f"database is locked: {e}".strip()) from e
            yield c
            self.commit_begun = True  # from here a failure may come after the server kept the write

    commit_begun = False  # whether the last write transaction reached its commit (the ledger's outage rule)

    def ping(self) -> None:
        """Reach the database and ask it something: raises while it cannot be reached."""
        with self.read_transaction() as c:
            c.execute("SELECT 1")

    def server_time_ms(self) -> int:
        """The database server's clock now, in ms since the epoch (the one clock every host of the ledger shares)."""
        with self.read_transaction() as c:
            c.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            return int(c.fetchone()[0])

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self.write_transaction() as c:
            return self._insert_events(c, stored_events, **kwargs)

    # the library's own _insert_events returns None; docket's insert_events above, its only caller here, wants the
    # positions
    def _insert_events(self, c: Any, stored_events: Sequence[StoredEvent],  # type: ignore[override]
                       **kwargs: Any) -> Sequence[int] | None:
        positions = self._insert_chained(c, stored_events) if stored_events else []
        tracking: Tracking | None = kwargs.get("tracking")
        if tracking is not None:
            self._insert_tracking(c, tracking)
        if stored_events:
            self._notify_channel(c)
        return positions

    def _insert_event_rows(self, c: Any, rows: list[tuple[int, str, int, str, bytes]]) -> None:
        c.execute(self.insert_event_rows_statement, [list(column) for column in zip(*rows)])

    def _insert_chain_rows(self, c: Any, rows: list[tuple[int, str]]) -> None:
        c.execute(self.insert_chain_rows_statement, [list(column) for column in zip(*rows)])

    def insert_tracking(self, tracking: Tracking) -> None:
        with self.datastore.get_connection() as conn, conn.transaction():
            # psycopg's overloads do not take tuple_row for a connection made with another row factory
            self._insert_tracking(conn.cursor(row_factory=tuple_row), tracking)  # type: ignore[call-overload]

    # Reads and writes the ledger's code makes on a cursor --------------------
    def head_position(self, c: Any) -> int:
        c.execute(f"SELECT MAX(notification_id) FROM {self.events_sql}")
        return c.fetchone()[0] or 0

    def head_state(self, c: Any) -> bytes | None:
        c.execute(f"SELECT state FROM {self.events_sql} ORDER BY notification_id DESC LIMIT 1")
        row = c.fetchone()
        return None if row is None else bytes(row[0])

    def intent_id_at(self, c: Any, position: int) -> str | None:
        c.execute(f"SELECT {_STATE_JSON} -> 'payload' ->> 'intent_id' FROM {self.events_sql} "
                  "WHERE notification_id = %s", (position,))
        row = c.fetchone()
        return None if row is None else row[0]

    def intent_rows(self, c: Any, after: int, until: int | None, types: Sequence[str]) -> list[tuple[int, str, Any]]:
        """(position, type, intent_id) of the events of these types after a position (up to one), in order."""
        c.execute(f"SELECT notification_id, topic, {_STATE_JSON} -> 'payload' ->> 'intent_id' FROM {self.events_sql} "
                  "WHERE notification_id > %s AND notification_id <= %s AND topic = ANY(%s) ORDER BY notification_id",
                  (after, 2**63 - 1 if until is None else until, list(types)))
        return c.fetchall()

    def notifications_at(self, c: Any, positions: Sequence[int]) -> list[Notification]:
        c.execute(f"SELECT notification_id, originator_id, originator_version, topic, state FROM {self.events_sql} "
                  "WHERE notification_id = ANY(%s) ORDER BY notification_id", (list(positions),))
        return [Notification(id=r[0], originator_id=r[1], originator_version=r[2], topic=r[3], state=bytes(r[4]))
                for r in c.fetchall()]

    def select_stream(self, originator_id: str, cursor: Any = None, *, after_version: int = 0,
                      until_version: int | None = None) -> list[Notification]:
        if cursor is None:
            with self.read_transaction() as c:
                return self.select_stream(originator_id, c, after_version=after_version, until_version=until_version)
        cursor.execute(
            f"SELECT notification_id, originator_version, topic, state FROM {self.events_sql} WHERE originator_id = %s "
            "AND originator_version > %s AND originator_version <= %s ORDER BY originator_version",
            (originator_id, after_version, until_version if until_version is not None else 2**63 - 1))
        return [Notification(id=r[0], originator_id=originator_id, originator_version=r[1], topic=r[2],
                             state=bytes(r[3])) for r in cursor.fetchall()]

    def select_topics(self, topics: Sequence[str], cursor: Any = None) -> list[Notification]:
        if cursor is None:
            with self.read_transaction() as c:
                return self.select_topics(topics, c)
        cursor.execute(f"SELECT notification_id, originator_id, originator_version, topic, state "
                       f"FROM {self.events_sql} WHERE topic = ANY(%s) ORDER BY notification_id", (list(topics),))
        return [Notification(id=r[0], originator_id=r[1], originator_version=r[2], topic=r[3], state=bytes(r[4]))
                for r in cursor.fetchall()]

    def select_snapshot(self, c: Any, stream: str) -> tuple[int, int, bytes] | None:
        c.execute(f"SELECT s.version, s.position, s.state FROM {self.snapshots_sql} s JOIN {self.chain_sql} h "
                  "ON h.position = s.position AND h.digest = s.digest WHERE s.stream = %s", (stream,))
        row = c.fetchone()
        return None if row is None else (row[0], row[1], bytes(row[2]))

    def save_snapshot(self, c: Any, stream: str, version: int, position: int, state: bytes) -> None:
        c.execute(f"INSERT INTO {self.snapshots_sql} (stream, version, position, digest, state) "
                  f"SELECT %s, %s, %s, digest, %s FROM {self.chain_sql} WHERE position = %s "
                  "ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, position = EXCLUDED.position, "
                  "digest = EXCLUDED.digest, state = EXCLUDED.state", (stream, version, position, state, position))

    def select_snapshots(self, c: Any) -> list[tuple[str, int, int, bytes]]:
        c.execute(f"SELECT stream, version, position, state FROM {self.snapshots_sql} ORDER BY stream")
        return [(r[0], r[1], r[2], bytes(r[3])) for r in c.fetchall()]

    def delete_snapshot(self, c: Any, stream: str) -> None:
        c.execute(f"DELETE FROM {self.snapshots_sql} WHERE stream = %s", (stream,))

    def save_merkle_nodes(self, c: Any, height: int, nodes: Sequence[tuple[int, str, bytes]]) -> None:
        c.executemany(self.insert_merkle_node_statement, [(height, node, digest, hash_) for node, digest, hash_ in nodes])

    def set_tracking(self, c: Any, application_name: str, position: int) -> None:
        """Put a tracking cursor at position, backwards too (the library's insert only moves forward)."""
        c.execute(f"INSERT INTO {self.tracking_sql} (application_name, notification_id) VALUES (%s, %s) "
                  "ON CONFLICT (application_name) DO UPDATE SET notification_id = EXCLUDED.notification_id",
                  (application_name, position))

    def tracked(self, c: Any, application_name: str) -> int:
        c.execute(f"SELECT MAX(notification_id) FROM {self.tracking_sql} WHERE application_name = %s",
                  (application_name,))
        return c.fetchone()[0] or 0

    def select_intent_events(self, c: Any, after: int, intents: Sequence[str], outcomes: Sequence[str],
                             unknowns: Sequence[str]) -> list[Notification]:
        """The intents after a position that no later outcome resolves, with their unknowns, in ledger order."""

        positions = unresolved_positions(self.intent_rows(c, after, None, (*intents, *outcomes, *unknowns)), outcomes)
        return self.notifications_at(c, positions) if positions else []


class ChainedPostgresFactory(PostgresFactory):
    """The library's PostgreSQL factory making docket's chained process recorder, on SQLite's table names."""

    def __init__(self, env: Environment | dict[str, str]):
        super().__init__(env)

    def process_recorder(self) -> ProcessRecorder:
        recorder = ChainedPostgresProcessRecorder(self.datastore)
        if self.env_create_table():
            recorder.create_table()
        return recorder

