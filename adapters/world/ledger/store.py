"""The chained event store: eventsourcing's SQLite recorders plus the hash chain.

``ChainedRecorder`` holds the chain logic in terms of a cursor and four small
SQL hooks, so the same mixin can sit on the library's PostgreSQL recorder
later. The SQLite classes below add it to ``SQLiteApplicationRecorder`` and
``SQLiteProcessRecorder``: events, their digests and (for the process recorder)
the tracking position are written on one cursor, in one transaction that takes
the write lock first (``BEGIN IMMEDIATE``), so positions have no gaps and the
chain never forks however many processes append at once.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    IntegrityError,
    JSONTranscoder,
    Mapper,
    Notification,
    PersistenceError,
    ProcessRecorder,
    StoredEvent,
    Tracking,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteCursor,
    SQLiteFactory,
    SQLiteTrackingRecorder,
    SQLiteTransaction,
)

from ....domain.kernel.canonical import canonical_json
from ....domain.kernel.chain import GENESIS_DIGEST, ChainHead, chain_entry, next_digest
from ....domain.events import Event, event_class
from ....domain.kernel.merkle import Tree
from .. import faults
from .ledger_rows import CHAIN_TABLE, MERKLE_BLOCK_HEIGHT, MERKLE_NODES_TABLE
from .writer_lock import writer_lock

__all__ = [
    "CanonicalMapper",
    "ChainBroken",
    "LedgerBusy",
    "ChainedRecorder",
    "ChainedSQLiteApplicationRecorder",
    "ChainedSQLiteFactory",
    "ChainedSQLiteProcessRecorder",
    "decode_event",
]


SNAPSHOTS_TABLE = "snapshots"
# An aggregate's state as of a version of its stream, so a command on a long stream does not fold it all.
# Not part of the chain: each row names the digest at its position (a snapshot of another or a rewritten
# ledger is never used), and `docket replay` recomputes every one from the events.
CREATE_SNAPSHOTS_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {SNAPSHOTS_TABLE} (stream TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "position INTEGER NOT NULL, digest TEXT NOT NULL, state BLOB NOT NULL)"
)


# The hashes of complete, aligned subtrees of the RFC 9162 tree over the chain digests (node i of height h
# covers positions i * 2**h + 1 .. (i + 1) * 2**h), so that a root or a proof over a million leaves reads a
# thousand nodes instead of every digest (adapters/service_layer/kernel/ledger_tree.py). The append that completes a block of
# 2**MERKLE_BLOCK_HEIGHT positions keeps its hash; a seal keeps those of older ledgers. Not part of the chain:
# each row names the chain digest at the node's last position and is used only while the chain still holds
# that digest; replay recomputes them.
CREATE_MERKLE_NODES_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {MERKLE_NODES_TABLE} (height INTEGER NOT NULL, node INTEGER NOT NULL, "
    "digest TEXT NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (height, node)) WITHOUT ROWID"
)


# Finds the few intents and outcomes after the effector's cursor without reading every event after it.
CREATE_TOPIC_INDEX = "CREATE INDEX IF NOT EXISTS stored_events_topic ON stored_events (topic)"


class ChainBroken(PersistenceError):
    """The stored chain head does not match the stored events: refuse to append."""


class ChainedRecorder:
    """Mixin: write one chain row per inserted event, on the caller's cursor.

    The chain logic is backend-neutral. A backend supplies the statements
    below (its own placeholders and position column) and ``_insert_event_rows``,
    and calls ``_insert_chained`` on its cursor while holding the lock that
    serialises appends: ``BEGIN IMMEDIATE`` here; on PostgreSQL, the
    ``LOCK TABLE ... IN EXCLUSIVE MODE`` the library's recorder already takes.
    """

    create_chain_table_statement = (
        f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (position INTEGER PRIMARY KEY, digest TEXT NOT NULL)"
    )
    select_heads_statement: str  # (last chain position, its digest, last event position), NULLs when empty
    insert_chain_statement: str  # (position, digest)
    select_digests_statement: str  # (after, until): the chain's digests of those positions, in order
    insert_merkle_node_statement: str  # (height, node, digest, hash), replacing

    def _chain_head(self, c: Any) -> ChainHead:
        c.execute(self.select_heads_statement)
        chain_position, digest, last_event = c.fetchone()
        head = ChainHead(chain_position or 0, digest or GENESIS_DIGEST)
        if (last_event or 0) != head.position:
            msg = (
                f"ledger is damaged: last event is at position {last_event or 0} but the chain "
                f"ends at {head.position}; run 'docket verify'"
            )
            raise ChainBroken(msg)
        return head

    def _insert_chained(self, c: Any, stored_events: Sequence[StoredEvent]) -> list[int]:
        """Insert events at the next positions with their digests; returns the positions."""
        head = self._chain_head(c)
        position, digest = head.position, head.digest
        event_rows, chain_rows = [], []
        for s in stored_events:
            position += 1
            stream = s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id
            digest = next_digest(digest, chain_entry(position, stream, s.originator_version, s.topic, s.state))
            event_rows.append((position, stream, s.originator_version, s.topic, s.state))
            chain_rows.append((position, digest))
        self._insert_event_rows(c, event_rows)
        self._insert_chain_rows(c, chain_rows)
        self._keep_completed_blocks(c, head.position, chain_rows)
        faults.crash_point("store:before-commit")
        return [row[0] for row in event_rows]

    def _keep_completed_blocks(self, c: Any, before: int, chain_rows: list[tuple[int, str]]) -> None:
        """The Merkle hash of each block of positions this append completed, with the digest at its end.

        About 2 ms for every 1,024 events appended: what lets a seal read a thousand hashes instead of a
        million digests.
        """
        width = 1 << MERKLE_BLOCK_HEIGHT
        last = before + len(chain_rows)
        nodes = []
        for end in range((before // width + 1) * width, last + 1, width):
            first = end - width  # the block is positions first + 1 .. end
            digests = []
            if first < before:
                c.execute(self.select_digests_statement, (first, before))
                digests = [row[0] for row in c.fetchall()]
            digests += [digest for _, digest in chain_rows[max(first - before, 0):end - before]]
            if len(digests) == width:  # else the chain has a gap: verify names it, nothing is kept
                nodes.append((MERKLE_BLOCK_HEIGHT, end // width - 1, digests[-1],
                              Tree([bytes.fromhex(d) for d in digests]).root()))
        if nodes:
            c.executemany(self.insert_merkle_node_statement, nodes)

    def _insert_event_rows(self, c: Any, rows: list[tuple[int, str, int, str, bytes]]) -> None:
        """Insert (position, stream, version, topic, state) rows at exactly those positions."""
        raise NotImplementedError

    def _insert_chain_rows(self, c: Any, rows: list[tuple[int, str]]) -> None:
        """Insert (position, digest) rows."""
        c.executemany(self.insert_chain_statement, rows)

    def chain_digests_between(self, c: Any, after: int, until: int) -> list[str]:
        """The chain's digests of positions (after, until], in order, read on the caller's cursor."""
        c.execute(self.select_digests_statement, (after, until))
        return [row[0] for row in c.fetchall()]


class LedgerBusy(PersistenceError):
    """The ledger's write lock stayed taken by another process past the lock timeout."""


class _ImmediateTransaction(SQLiteTransaction):
    """Take SQLite's write lock before reading the chain head.

    A rollback that fails (SQLite may already have rolled back, for example on a
    full disk) never replaces the error that caused it.
    """

    def __enter__(self) -> SQLiteCursor:
        cursor = self.connection.cursor()
        _begin_immediate(cursor.sqlite_cursor)
        return cursor

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        if exc_val is not None:
            _rollback_quietly(self.connection)
        super().__exit__(exc_type, exc_val, exc_tb)


def _begin_immediate(cursor: sqlite3.Cursor) -> None:
    try:
        cursor.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise LedgerBusy(str(e)) from e
        raise


@contextmanager
def _in_process_turn(datastore: Any) -> Iterator[None]:
    """This thread's turn at the ledger's write lock among this process's threads (writer_lock.py); LedgerBusy when
    it does not come within the lock timeout, as SQLite's own lock says it."""

    lock = writer_lock(datastore)
    timeout = getattr(datastore.pool, "lock_timeout", None)
    if not lock.acquire(timeout=float(SQLITE3_DEFAULT_LOCK_TIMEOUT if timeout is None else timeout)):
        raise LedgerBusy("database is locked (by another thread of this process)")
    try:
        yield
    finally:
        lock.release()


def _rollback_quietly(connection: Any) -> None:
    try:
        connection.rollback()
    except sqlite3.Error:
        pass  # the error that led here is the one to report


class ChainedSQLiteApplicationRecorder(ChainedRecorder, SQLiteApplicationRecorder):
    def __init__(self, datastore: Any, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name)
        last_digest = f"SELECT position, digest FROM {CHAIN_TABLE} ORDER BY position DESC LIMIT 1"
        self.select_heads_statement = (
            f"SELECT (SELECT position FROM ({last_digest})), (SELECT digest FROM ({last_digest})), "
            f"(SELECT MAX(rowid) FROM {self.events_table_name})"
        )
        self.insert_chain_statement = f"INSERT INTO {CHAIN_TABLE} (position, digest) VALUES (?, ?)"
        self.select_digests_statement = (
            f"SELECT digest FROM {CHAIN_TABLE} WHERE position > ? AND position <= ? ORDER BY position")
        self.insert_merkle_node_statement = (
            f"INSERT OR REPLACE INTO {MERKLE_NODES_TABLE} (height, node, digest, hash) VALUES (?, ?, ?, ?)")
        self.insert_event_rows_statement = (
            f"INSERT INTO {self.events_table_name} "
            "(rowid, originator_id, originator_version, topic, state) VALUES (?,?,?,?,?)"
        )

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), self.create_chain_table_statement,
                CREATE_SNAPSHOTS_TABLE, CREATE_TOPIC_INDEX, CREATE_MERKLE_NODES_TABLE]

    def intent_id_at(self, c: SQLiteCursor, position: int) -> str | None:
        """The intent_id of the event at position (None when there is none, or it names no intent)."""
        c.execute(f"SELECT json_extract(state, '$.payload.intent_id') FROM {self.events_table_name} WHERE rowid = ?",
                  (position,))
        row = c.fetchone()
        return None if row is None else row[0]

    def select_snapshot(self, c: SQLiteCursor, stream: str) -> tuple[int, int, bytes] | None:
        """(version, position, state) of stream's snapshot, if it has one and the chain still holds
        the digest it was taken at (a snapshot of a rewritten or another ledger is not used)."""
        c.execute(
            f"SELECT s.version, s.position, s.state FROM {SNAPSHOTS_TABLE} s JOIN {CHAIN_TABLE} h "
            "ON h.position = s.position AND h.digest = s.digest WHERE s.stream = ?", (stream,))
        row = c.fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def save_snapshot(self, c: SQLiteCursor, stream: str, version: int, position: int, state: bytes) -> None:
        """Keep stream's state as of version (at position), in the caller's transaction."""
        c.execute(
            f"INSERT OR REPLACE INTO {SNAPSHOTS_TABLE} (stream, version, position, digest, state) "
            f"SELECT ?, ?, ?, digest, ? FROM {CHAIN_TABLE} WHERE position = ?",
            (stream, version, position, state, position))

    def select_snapshots(self, c: SQLiteCursor) -> list[tuple[str, int, int, bytes]]:
        c.execute(f"SELECT stream, version, position, state FROM {SNAPSHOTS_TABLE} ORDER BY stream")
        return [(r[0], r[1], r[2], r[3]) for r in c.fetchall()]

    def delete_snapshot(self, c: SQLiteCursor, stream: str) -> None:
        c.execute(f"DELETE FROM {SNAPSHOTS_TABLE} WHERE stream = ?", (stream,))

    def save_merkle_nodes(self, c: SQLiteCursor, height: int, nodes: Sequence[tuple[int, str, bytes]]) -> None:
        """Keep (node, digest at its last position, hash) rows of one height, in the caller's transaction."""
        c.executemany(self.insert_merkle_node_statement,
                      [(height, node, digest, hash_) for node, digest, hash_ in nodes])

    @contextmanager
    def write_transaction(self) -> Iterator[SQLiteCursor]:
        """A cursor holding the ledger's write lock: what is read through it cannot change
        before what is written through it commits (decisions run here). A stream version taken
        raises IntegrityError, as the library's own recorders report it."""
        with _in_process_turn(self.datastore), self.datastore.get_connection(commit=True) as conn:
            cursor = conn.cursor()
            _begin_immediate(cursor.sqlite_cursor)
            try:
                yield cursor
                conn.commit()
            except sqlite3.IntegrityError as e:
                _rollback_quietly(conn)
                raise IntegrityError(e) from e
            except BaseException:
                _rollback_quietly(conn)
                raise

    def head_position(self, c: SQLiteCursor) -> int:
        """The last event's position (0 for an empty ledger), read on the given cursor."""
        c.execute(f"SELECT MAX(rowid) FROM {self.events_table_name}")
        return c.fetchone()[0] or 0

    def head_state(self, c: SQLiteCursor) -> bytes | None:
        """The stored state of the last event (None for an empty ledger)."""
        c.execute(f"SELECT state FROM {self.events_table_name} ORDER BY rowid DESC LIMIT 1")
        row = c.fetchone()
        return None if row is None else row[0]

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with _in_process_turn(self.datastore), self.datastore.get_connection(commit=True) as conn, \
                _ImmediateTransaction(conn, commit=True) as c:
            return self._insert_events(c, stored_events, **kwargs)

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **_: Any) -> Sequence[int] | None:
        return self._insert_chained(c, stored_events)

    def _insert_event_rows(self, c: Any, rows: list[tuple[int, str, int, str, bytes]]) -> None:
        c.executemany(self.insert_event_rows_statement, rows)

    def select_stream(self, originator_id: str, cursor: SQLiteCursor | None = None, *,
                      after_version: int = 0, until_version: int | None = None) -> list[Notification]:
        """A stream's events in version order (after a version, up to one), each with its ledger position.

        With a cursor, read inside that (write) transaction.
        """
        if cursor is None:
            with self.datastore.transaction(commit=False) as c:
                return self.select_stream(originator_id, c, after_version=after_version, until_version=until_version)
        cursor.execute(
            f"SELECT rowid, originator_version, topic, state FROM {self.events_table_name} "
            "WHERE originator_id=? AND originator_version > ? AND originator_version <= ? ORDER BY originator_version",
            (originator_id, after_version, until_version if until_version is not None else 2**63 - 1),
        )
        return [
            Notification(id=r[0], originator_id=originator_id, originator_version=r[1], topic=r[2], state=r[3])
            for r in cursor.fetchall()
        ]

    def select_topics(self, topics: Sequence[str], cursor: SQLiteCursor | None = None) -> list[Notification]:
        """Every event of these types (type names), in ledger order, with its position; with a cursor, read inside
        that (write) transaction."""
        if cursor is None:
            with self.datastore.transaction(commit=False) as c:
                return self.select_topics(topics, c)
        cursor.execute(f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name} "
                       f"WHERE topic IN ({','.join('?' * len(topics))}) ORDER BY rowid", tuple(topics))
        return [Notification(id=r[0], originator_id=r[1], originator_version=r[2], topic=r[3], state=r[4])
                for r in cursor.fetchall()]

    def select_intent_events(self, c: SQLiteCursor, after: int, intents: Sequence[str], outcomes: Sequence[str],
                             unknowns: Sequence[str]) -> list[Notification]:
        """The intents after a position that no later outcome resolves, with their unknowns, in ledger order.

        Events of these types are found through the topic index and matched by
        their payload's intent_id without being decoded; only the unresolved
        ones are read whole.
        """
        positions = unresolved_positions(self.intent_rows(c, after, None, (*intents, *outcomes, *unknowns)), outcomes)
        return self.notifications_at(c, positions)

    def intent_rows(self, c: SQLiteCursor, after: int, until: int | None,
                    types: Sequence[str]) -> list[tuple[int, str, Any]]:
        """(position, type, intent_id) of the events of these types after a position (up to one), in order."""
        c.execute(
            f"SELECT rowid, topic, json_extract(state, '$.payload.intent_id') FROM {self.events_table_name} "
            f"WHERE rowid > ? AND rowid <= ? AND topic IN ({','.join('?' * len(types))}) ORDER BY rowid",
            (after, 2**63 - 1 if until is None else until, *types),
        )
        return c.fetchall()

    def notifications_at(self, c: SQLiteCursor, positions: Sequence[int]) -> list[Notification]:
        """The events at these positions, in ledger order."""
        found: list[Notification] = []
        for start in range(0, len(positions), 500):
            chunk = positions[start:start + 500]
            c.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name} "
                f"WHERE rowid IN ({','.join('?' * len(chunk))}) ORDER BY rowid", chunk)
            found += [Notification(id=r[0], originator_id=r[1], originator_version=r[2], topic=r[3], state=r[4])
                      for r in c.fetchall()]
        return found

    @contextmanager
    def read_transaction(self) -> Iterator[SQLiteCursor]:
        """A cursor in a transaction that writes nothing."""
        with self.datastore.transaction(commit=False) as c:
            yield c


def unresolved_positions(rows: Sequence[tuple[int, str, Any]], outcomes: Sequence[str]) -> list[int]:
    """The positions, in order, of the intents (and their unknowns) among (position, type, intent_id) rows in ledger
    order that no later outcome of the same intent_id resolves."""
    outcome_types = set(outcomes)
    unresolved: dict[Any, list[int]] = {}
    for position, topic, intent_id in rows:
        if topic in outcome_types:
            unresolved.pop(intent_id, None)
        else:
            unresolved.setdefault(intent_id, []).append(position)
    return sorted(p for ps in unresolved.values() for p in ps)


class ChainedSQLiteProcessRecorder(SQLiteTrackingRecorder, ChainedSQLiteApplicationRecorder, ProcessRecorder):
    """Chained events and a tracking position, in the same transaction."""

    def __init__(self, datastore: Any, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)

    def create_table(self) -> None:
        """Create every table in one write transaction, so any number of concurrent inits agree.

        The library looks for the tracking table before its own (deferred)
        transaction, so two processes could both decide to create it and the
        loser failed to record the migration row. A ledger that has them all
        already (every open after the first) is found so by a read, which takes
        no write lock.
        """
        with self.datastore.transaction(commit=False) as c:
            if self._tables_exist(c):
                return
        with _in_process_turn(self.datastore), self.datastore.get_connection(commit=True) as conn, \
                _ImmediateTransaction(conn, commit=True) as c:
            c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tracking'")
            self.tracking_table_exists = c.fetchone() is not None
            if self.tracking_table_exists:
                self.tracking_migration_previous = self._max_tracking_id(self.table_migration_identifier, c)
                self.tracking_migration_current = self.tracking_migration_previous
            self._create_table(c)

    def _tables_exist(self, c: SQLiteCursor) -> bool:
        """Every table and index create_table makes is there, and the library's tracking migration is recorded."""
        c.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
        present = {row[0] for row in c.fetchall()}
        named = (re.search(r"IF NOT EXISTS (\w+)", statement) for statement in self.create_table_statements)
        created = {match[1] for match in named if match is not None}  # a statement that names nothing checks nothing
        if not created <= present:
            return False
        migrated = self._max_tracking_id(self.table_migration_identifier, c)
        if not migrated:
            return False
        self.tracking_table_exists = True
        self.tracking_migration_previous = self.tracking_migration_current = migrated
        return True

    def set_tracking(self, c: SQLiteCursor, application_name: str, position: int) -> None:
        """Put a tracking cursor at position, backwards too (the library's insert only moves forward)."""
        c.execute("INSERT OR REPLACE INTO tracking (application_name, notification_id) VALUES (?, ?)",
                  (application_name, position))

    def tracked(self, c: SQLiteCursor, application_name: str) -> int:
        return self._max_tracking_id(application_name, c) or 0

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        positions = super()._insert_events(c, stored_events, **kwargs)
        tracking: Tracking | None = kwargs.get("tracking")
        if tracking is not None:
            self._insert_tracking(c, tracking)
        return positions


class ChainedSQLiteFactory(SQLiteFactory):
    application_recorder_class = ChainedSQLiteApplicationRecorder
    # eventsourcing types this as its SQLiteProcessRecorder; ours is a recorder of the same shape and constructor
    process_recorder_class = ChainedSQLiteProcessRecorder  # type: ignore[assignment]


class CanonicalMapper(Mapper):
    """Events <-> stored rows: topic is the fixed type name, state canonical JSON."""

    def __init__(self) -> None:
        super().__init__(transcoder=JSONTranscoder())

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        event: Event = domain_event
        return StoredEvent(
            originator_id=event.stream,
            originator_version=event.version,
            topic=event.type_name(),
            state=canonical_json({"payload": event.payload(), "recorded_at": event.recorded_at}),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return decode_event(stored_event.originator_id, stored_event.originator_version,
                            stored_event.topic, stored_event.state)


def decode_event(stream: Any, version: int, topic: str, state: bytes) -> Event:
    body = json.loads(state)
    cls = event_class(topic)
    return cls.model_validate(
        {**body["payload"], "stream": str(stream), "version": version, "recorded_at": body["recorded_at"]}
    )
