"""The ledger store's database errors as docket's StorageFailed, translated here, where the store is.

The layers above (the service layer, the CLI) never name SQLite: the reader's
methods raise StorageFailed (``translated``), and an error that escapes the
store some other way is recognised here by the CLI's last resort.
"""

from __future__ import annotations

import sqlite3

from ....domain.kernel.errors import DocketError, StorageFailed, VerificationFailed, translating
from .ledger_rows import first_undecodable, undecodable_column
from ....domain.kernel.codes import Code

__all__ = ["ledger_failure", "storage_failure", "translated"]

translated = translating(sqlite3.Error)

# the event store's translations of SQLite's errors (eventsourcing.persistence), named so as not to import it
_STORE_ERRORS = ("OperationalError", "DatabaseError", "InterfaceError")


def ledger_failure(conn: sqlite3.Connection, error: sqlite3.Error) -> DocketError:
    """A ledger file's error as docket's: text in it that is not UTF-8 (only an edit outside docket writes that) is
    a broken chain at the first position holding such text, like any other edit; anything else StorageFailed."""
    if undecodable_column(error) is not None:
        try:
            found = first_undecodable(conn)
        except sqlite3.Error:
            found = None
        if found is not None:
            position, column = found
            return VerificationFailed(Code.CHAIN_BROKEN, f"position {position}: the stored {column} is not UTF-8 text "
                                                      "(the ledger was changed outside docket)")
    return StorageFailed(str(error))


def storage_failure(error: BaseException) -> DocketError | None:
    """StorageFailed for a failure of the database (SQLite's or PostgreSQL's driver's own error, or the event store's
    translation of one); a ledger holding text that is not UTF-8 fails verification (exit 1), wherever it is read."""
    cause = error.__cause__ if isinstance(error, StorageFailed) else error
    column = undecodable_column(cause) if cause is not None else None
    if column is not None:
        return VerificationFailed(Code.LEDGER_UNVERIFIABLE, f"the ledger holds text that is not UTF-8 (column {column!r})"
                                                         ": it was changed outside docket; 'docket verify' names the "
                                                         "position")
    if isinstance(error, StorageFailed):
        return error
    if isinstance(error, sqlite3.DatabaseError) or type(error).__name__ in _STORE_ERRORS or (
            type(error).__module__.startswith(("psycopg.", "psycopg_pool")) and type(error).__name__ != "Warning"):
        return StorageFailed(str(error))
    return None
