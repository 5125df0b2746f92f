"""Opening a ledger that is already set up only reads: a writer holding the lock does not hold up the open."""

from __future__ import annotations

import sqlite3

from docket.adapters.service_layer.kernel.ledger import Ledger


def test_opening_an_existing_ledger_takes_no_write_lock(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()  # the first open creates the tables, in a write transaction
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of an append
    try:
        ledger = Ledger(path, lock_timeout=1)  # taking the lock here would wait, then fail with ledger-busy
        try:
            assert ledger.head() == 0
        finally:
            ledger.close()
    finally:
        writer.rollback()
        writer.close()


def test_a_ledger_missing_a_table_gets_it_on_open(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE snapshots")  # as a ledger made before snapshots were kept
    Ledger(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'snapshots'").fetchone() == ("snapshots",)
