"""The chained recorders still honour every contract of the library's own recorders.

These are eventsourcing's own abstract recorder test cases, run against docket's
chained SQLite recorders on a real file; afterwards the chain must verify.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
    ProcessRecorderTestCase,
)

from docket.adapters.world.ledger_rows import read_chain_rows
from docket.adapters.world.store import ChainedSQLiteApplicationRecorder, ChainedSQLiteProcessRecorder
from docket.domain.chain import verify_chain


class _FileBacked:
    recorder_class: type = ChainedSQLiteApplicationRecorder

    def setUp(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.db_path = Path(self._dir.name) / "ledger.sqlite"
        self.datastore = SQLiteDatastore(str(self.db_path))

    def tearDown(self) -> None:
        with sqlite3.connect(self.db_path) as conn:
            head, broken = verify_chain(read_chain_rows(conn))
            count = conn.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0]
        self.datastore.close()
        self._dir.cleanup()
        assert broken is None, broken
        assert head.position == count

    def create_recorder(self):  # noqa: ANN201
        recorder = self.recorder_class(self.datastore)
        recorder.create_table()
        return recorder


class TestChainedApplicationRecorderContract(_FileBacked, ApplicationRecorderTestCase):
    test_performance = None
    test_concurrent_throughput = None


class TestChainedProcessRecorderContract(_FileBacked, ProcessRecorderTestCase):
    recorder_class = ChainedSQLiteProcessRecorder
    test_performance = None


class TestChainedNonInterleavingNotificationIDs(_FileBacked, NonInterleavingNotificationIDsBaseCase):
    pass
