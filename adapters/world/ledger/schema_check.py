"""A ledger file holds exactly the schema docket's recorder creates, nothing else.

The chain covers rows, not the schema around them: a trigger can rewrite what
is inserted or move the effector's tracking position, a view or an index can
sit beside the tables. Like ``git fsck``, verify names every object it does not
expect. The expected objects are listed here, so that verify needs only the
standard library; a test checks that the list is what the recorder creates.
"""

from __future__ import annotations

import re
import sqlite3

from ....domain.kernel.errors import VerificationFailed
from ....domain.kernel.codes import Code

__all__ = ["EXPECTED_SCHEMA", "check_schema", "schema_of"]

EXPECTED_SCHEMA: dict[tuple[str, str], tuple[str, str | None]] = {
    # (type, name): (table it belongs to, its CREATE statement with whitespace collapsed)
    ("table", "stored_events"): ("stored_events", "CREATE TABLE stored_events (originator_id TEXT, originator_version "
                                 "INTEGER, topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"),
    ("index", "sqlite_autoindex_stored_events_1"): ("stored_events", None),
    ("table", "chain"): ("chain", "CREATE TABLE chain (position INTEGER PRIMARY KEY, digest TEXT NOT NULL)"),
    ("table", "tracking"): ("tracking", "CREATE TABLE tracking (application_name TEXT, notification_id INTEGER, "
                            "PRIMARY KEY (application_name)) WITHOUT ROWID"),
    ("table", "snapshots"): ("snapshots", "CREATE TABLE snapshots (stream TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                             "position INTEGER NOT NULL, digest TEXT NOT NULL, state BLOB NOT NULL)"),
    ("index", "sqlite_autoindex_snapshots_1"): ("snapshots", None),
    ("index", "stored_events_topic"): ("stored_events", "CREATE INDEX stored_events_topic ON stored_events (topic)"),
    ("table", "merkle_nodes"): ("merkle_nodes", "CREATE TABLE merkle_nodes (height INTEGER NOT NULL, node INTEGER "
                                "NOT NULL, digest TEXT NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (height, node)) "
                                "WITHOUT ROWID"),
}

# Added after the first ledgers were made: a ledger only read since then does not have them yet.
_MADE_ON_FIRST_WRITE = {("table", "snapshots"), ("index", "sqlite_autoindex_snapshots_1"),
                        ("index", "stored_events_topic"), ("table", "merkle_nodes")}

# ANALYZE and PRAGMA optimize keep the query planner's statistics here; they change no row and no result.
_PLANNER_STATISTICS = re.compile(r"sqlite_stat\d")


def schema_of(conn: sqlite3.Connection) -> dict[tuple[str, str], tuple[str, str | None]]:
    """Every object in the file's schema, in EXPECTED_SCHEMA's form."""
    return {
        (type_, name): (table, " ".join(sql.split()) if sql is not None else None)
        for type_, name, table, sql in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
        if not (type_ == "table" and _PLANNER_STATISTICS.fullmatch(name))
    }


def check_schema(conn: sqlite3.Connection) -> None:
    """Raise VerificationFailed naming each object that is unexpected, redefined or missing."""
    found = schema_of(conn)
    problems = []
    for (type_, name), (table, sql) in sorted(found.items()):
        expected = EXPECTED_SCHEMA.get((type_, name))
        if expected is None:
            problems.append(f"unexpected {type_} {name}" + (f" on {table}" if table != name else ""))
        elif expected != (table, sql):
            problems.append(f"{type_} {name} is not defined as docket defines it")
    problems += [f"{type_} {name} is missing"
                 for type_, name in sorted(EXPECTED_SCHEMA.keys() - found.keys() - _MADE_ON_FIRST_WRITE)]
    if problems:
        raise VerificationFailed(
            Code.SCHEMA_MISMATCH, f"the ledger file's schema is not docket's: {'; '.join(problems)}")
