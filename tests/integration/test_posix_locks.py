"""A command never drops SQLite's locks on its own ledger or views, so no commit of it is ever lost.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's included. A command
opens the ledger through a read-only connection first, then makes the ledger application, whose file check
opened and closed the file once more: from then on another process closing its connection took the ledger
for unused, folded its write-ahead log into the file and deleted it, and the events this command committed
afterwards went into the deleted log. Found as `ledger-rewritten` beside SIGKILLed writers
(tests/e2e/test_random_kills.py): the views had projected an event that no other process ever saw.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.service_layer.kernel.projector import open_views
from docket.adapters.world.files.files import check_ledger_file
from docket.adapters.world.ledger.ledger_rows import connect_read_only
from docket.projections.views import open_read_only

from .test_ledger_watch import T0, task_event


def _another_process_opens_and_closes(path: Path) -> None:
    subprocess.run([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                    "c.execute('SELECT count(*) FROM sqlite_master').fetchall(); c.close()", str(path)], check=True)


def _seen_by_another_process(path: Path, sql: str) -> int:
    out = subprocess.run([sys.executable, "-c", "import sqlite3, sys; "
                          "print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])", str(path), sql],
                         check=True, capture_output=True, text=True).stdout
    return int(out)


def test_events_appended_after_the_file_checks_reach_the_file(tmp_path: Path):
    path = tmp_path / "ledger.sqlite"
    made = Ledger(path)
    made.initialise(T0)
    made.close()
    # what a command does: check the file, read through a read-only connection, then make the application
    assert check_ledger_file(path)
    reader = connect_read_only(path)
    assert reader.execute("SELECT count(*) FROM stored_events").fetchone()[0] == 1
    ledger = Ledger(path)
    try:
        ledger.append([task_event(1)])
        _another_process_opens_and_closes(path)
        ledger.append([task_event(2)])
        assert _seen_by_another_process(path, "SELECT count(*) FROM stored_events") == 3
    finally:
        ledger.close()
        reader.close()
    assert _seen_by_another_process(path, "SELECT count(*) FROM stored_events") == 3


def test_views_written_after_a_second_open_reach_the_file(tmp_path: Path):
    path = tmp_path / "views.sqlite"
    subprocess.run([sys.executable, "-c", "import sys; from docket.adapters.service_layer.kernel.projector import open_views; "
                    "open_views(sys.argv[1]).conn.close()", str(path)], check=True)
    first = open_read_only(str(path))  # status's fast path reads the views as they are ...
    assert first is not None and first.position() == 0
    second = open_views(path)  # ... then a command brings them up to a new event
    second.conn.execute("BEGIN IMMEDIATE")
    second.conn.execute("UPDATE projection_position SET value = '7' WHERE key = 'position'")
    second.conn.execute("COMMIT")
    _another_process_opens_and_closes(path)
    second.conn.execute("BEGIN IMMEDIATE")
    second.conn.execute("UPDATE projection_position SET value = '8' WHERE key = 'position'")
    second.conn.execute("COMMIT")
    try:
        assert _seen_by_another_process(path, "SELECT value FROM projection_position WHERE key = 'position'") == 8
    finally:
        first.conn.close()
        second.conn.close()
