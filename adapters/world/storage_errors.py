"""The ledger store's database errors as docket's StorageFailed, translated here, where the store is.

The layers above (the service layer, the CLI) never name SQLite: the reader's
methods raise StorageFailed (``translated``), and an error that escapes the
store some other way is recognised here by the CLI's last resort.
"""

from __future__ import annotations

import sqlite3

from ...domain.errors import StorageFailed, translating

__all__ = ["storage_failure", "translated"]

translated = translating(sqlite3.Error)

# the event store's translations of SQLite's errors (eventsourcing.persistence), named so as not to import it
_STORE_ERRORS = ("OperationalError", "DatabaseError", "InterfaceError")


def storage_failure(error: BaseException) -> StorageFailed | None:
    """StorageFailed for a failure of the database (SQLite's or PostgreSQL's driver's own error, or the event store's
    translation of one)."""
    if isinstance(error, StorageFailed):
        return error
    if isinstance(error, sqlite3.DatabaseError) or type(error).__name__ in _STORE_ERRORS or (
            type(error).__module__.startswith(("psycopg.", "psycopg_pool")) and type(error).__name__ != "Warning"):
        return StorageFailed(str(error))
    return None
