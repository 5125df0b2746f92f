"""The chained recorders still honour every contract of the library's own recorders.

These are eventsourcing's own abstract recorder test cases, run against docket's
chained SQLite recorders on a real file; afterwards the chain must verify.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
    ProcessRecorderTestCase,
)

from docket.adapters.world.ledger.ledger_rows import read_chain_rows
from docket.adapters.world.ledger.store import ChainedSQLiteApplicationRecorder, ChainedSQLiteProcessRecorder
from docket.domain.kernel.chain import verify_chain


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


class _DatabaseBacked:
    """The same contract on docket's chained PostgreSQL recorder, in a fresh database of the test cluster."""

    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str) -> None:
        self.url = postgres_url

    def setUp(self) -> None:
        from eventsourcing.postgres import PostgresDatastore

        from docket.adapters.world.ledger.database_url import postgres_env

        env = postgres_env(self.url, lock_timeout=30)
        self.datastore = PostgresDatastore(
            dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
            user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"], lock_timeout=30, pool_size=4,
            max_overflow=8)  # uuid originator ids, the library's own tests' default: chained by their hex (store.py)

    def tearDown(self) -> None:
        from docket.adapters.world.ledger.postgres_reader import postgres_reader

        self.datastore.close()
        with postgres_reader(self.url) as reader:
            head, broken = verify_chain(reader.chain_rows())
            count = reader.head_position()
        assert broken is None, broken
        assert head.position == count

    def create_recorder(self):  # noqa: ANN201
        from docket.adapters.world.ledger.postgres_store import ChainedPostgresProcessRecorder

        recorder = ChainedPostgresProcessRecorder(self.datastore)
        recorder.create_table()
        return recorder


class TestChainedPostgresApplicationRecorderContract(_DatabaseBacked, ApplicationRecorderTestCase):
    test_performance = None
    test_concurrent_throughput = None


class TestChainedPostgresProcessRecorderContract(_DatabaseBacked, ProcessRecorderTestCase):
    test_performance = None


class TestChainedPostgresNonInterleavingNotificationIDs(_DatabaseBacked, NonInterleavingNotificationIDsBaseCase):
    pass
