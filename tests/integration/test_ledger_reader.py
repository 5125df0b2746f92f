"""The LedgerReader port: the SQLite reader and the in-memory fake keep the same promises, and nothing else reads
the ledger's tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from tests.fakes.ledger_reader import FakeLedgerReader
from docket.adapters.world.ledger.reader import SqliteLedgerReader, ledger_reader

from .test_idle_costs import T0, mixed

ROOT = Path(__file__).resolve().parents[2]
LEDGER_TABLES = ("stored_events", "chain", "tracking", "snapshots", "merkle_nodes")
# Where SQL on the ledger's tables may be written: the store (writes) and the reader (reads), and the file checks.
ALLOWED = {"adapters/world/ledger/store.py", "adapters/world/ledger/reader.py", "adapters/world/ledger/ledger_rows.py",  # the reader's rows
           "adapters/world/ledger/schema_check.py", "adapters/world/files/files.py",
           "adapters/world/ledger/postgres_store.py", "adapters/world/ledger/postgres_reader.py"}  # the same, on PostgreSQL
# a table named outright, or by the names its owners give it in f-strings
SQL_ON_A_LEDGER_TABLE = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(?:\[?(?:" + "|".join(LEDGER_TABLES) + r")\b"
    r"|\{[^}]*(?:events_table_name|CHAIN_TABLE|SNAPSHOTS_TABLE|MERKLE_NODES_TABLE|TRACKING)[^}]*\})", re.IGNORECASE)


def _copied(real: SqliteLedgerReader) -> FakeLedgerReader:
    """The fake, given the same events one by one: it chains them itself."""
    fake = FakeLedgerReader()
    for _position, stream, _version, type_, state in real.events():
        body = json.loads(state)
        fake.append(stream, type_, body["payload"], body["recorded_at"])
    return fake


@pytest.fixture
def readers(ledger_path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append(mixed(60))
    ledger.close()
    with ledger_reader(ledger_path) as real:
        yield real, _copied(real)


def test_the_fake_reader_answers_every_read_as_the_sqlite_one_does(readers):
    real, fake = readers
    head = real.head_position()
    assert head > 60 and fake.head_position() == head
    assert list(fake.chain_rows()) == list(real.chain_rows())  # the same digests: chained as the store chains
    for after, until in [(0, None), (5, 9), (head - 1, None), (head, None), (3, 3)]:
        assert list(fake.chain_rows(after=after, until=until)) == list(real.chain_rows(after=after, until=until))
        assert list(fake.events(after=after, until=until)) == list(real.events(after=after, until=until))
    topics = ["LeaseGranted.v1", "RunCompleted.v1"]
    assert list(fake.events(topics=topics)) == list(real.events(topics=topics)) != []
    positions = [1, 2, 7, head, head + 5]
    assert list(fake.events_at(positions)) == list(real.events_at(positions))
    for position in (0, 1, head, head + 1):
        assert fake.event_at(position) == real.event_at(position)
        assert fake.digest_at(position) == real.digest_at(position)
        assert fake.orphan_digest_after(position) == real.orphan_digest_after(position)
    assert fake.chain_head() == real.chain_head() and real.chain_head().position == head
    assert fake.last_event_and_chain_end() == real.last_event_and_chain_end() == (head, head)
    for stream in ("run:r1", "run:nobody"):
        assert fake.has_stream(stream) == real.has_stream(stream)
    real.check_schema()


def test_an_empty_fake_reads_as_an_empty_ledger_file(tmp_path):
    import sqlite3

    path = tmp_path / "empty.sqlite"
    with sqlite3.connect(path) as conn:  # the ledger's two read tables, no rows
        conn.execute("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT, "
                     "state BLOB, PRIMARY KEY (originator_id, originator_version))")
        conn.execute("CREATE TABLE chain (position INTEGER PRIMARY KEY, digest TEXT NOT NULL)")
    conn.close()
    fake = FakeLedgerReader()
    with ledger_reader(path) as real:
        for reader in (real, fake):
            assert (reader.head_position(), reader.chain_head(), reader.digest_at(1), reader.event_at(1),
                    reader.last_event_and_chain_end(), list(reader.events())) == (0, None, "", None, (0, 0), [])


def test_nothing_outside_the_store_and_the_reader_names_a_ledger_table_in_sql():
    found = []
    for folder in ("adapters", "cli", "projections"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in ALLOWED:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if SQL_ON_A_LEDGER_TABLE.search(line):
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []


def test_the_rule_sees_sql_on_a_ledger_table():
    for sql in ('"SELECT digest FROM chain WHERE position = ?"', 'f"SELECT MAX(rowid) FROM stored_events"',
                '"SELECT * FROM snapshots"', '"INSERT INTO tracking VALUES (?)"', "JOIN chain c ON",
                'f"SELECT MAX(rowid) FROM {self.recorder.events_table_name}"', 'f"FROM {CHAIN_TABLE} WHERE"'):
        assert SQL_ON_A_LEDGER_TABLE.search(sql), sql
    for prose in ("the chain from position 1", "SELECT * FROM runs", "hash chain", "FROM checkpoint.[runs]"):
        assert not SQL_ON_A_LEDGER_TABLE.search(prose), prose
