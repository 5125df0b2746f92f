"""docket go's watch over its ledger file (adapters/world/ledger/ledger_watch.py) on real SQLite files: what its own writes
and other docket writers append passes; a file deleted or replaced, an event edited with or without the chain
recomputed, a tail cut, does not."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.world.ledger.ledger_watch import watch_ledger
from docket.domain.kernel.chain import GENESIS_DIGEST, chain_entry, next_digest
from docket.domain.kernel.codes import Code
from docket.domain.kernel.errors import LedgerTampered, VerificationFailed
from docket.domain.events import TaskPlanned

T0 = "2026-01-01T00:00:00.000Z"


def task_event(i: int) -> TaskPlanned:
    return TaskPlanned(stream=f"task:t{i}", version=1, recorded_at=T0, task_id=f"t{i}", run_id="r", title=f"task {i}")


@pytest.fixture
def watched(ledger_path: Path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    ledger.watch = watch_ledger(ledger_path)
    yield ledger
    ledger.close()


def _edit(path: Path, position: int, old: bytes, new: bytes, *, recompute: bool) -> None:
    """What an agent with the file can do: change an event's bytes, and recompute the chain by the documented
    formula from there on."""
    with sqlite3.connect(path, timeout=30) as db:
        state = db.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()[0]
        db.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (state.replace(old, new), position))
        if recompute:
            digest = GENESIS_DIGEST
            for row in db.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                                  "ORDER BY rowid").fetchall():
                digest = next_digest(digest, chain_entry(*row))
                db.execute("UPDATE chain SET digest = ? WHERE position = ?", (digest, row[0]))


def _refused(ledger: Ledger, code: Code) -> str:
    with pytest.raises(LedgerTampered) as raised:
        ledger.require_intact()
    assert raised.value.code == code and isinstance(raised.value, VerificationFailed)
    assert raised.value.exit_code == 1
    return raised.value.message


def test_what_docket_and_other_docket_writers_append_is_intact(watched: Ledger, ledger_path: Path):
    watched.append([task_event(2)])
    other = Ledger(ledger_path)  # `docket run stop` from another terminal: it appends on the same chain
    other.append([task_event(3)])
    other.close()
    watched.append([task_event(4)])
    watched.require_intact()
    watched.append([task_event(5)])
    watched.require_intact()
    assert watched.watch.check().position == 6


def test_no_watch_no_check(ledger_path: Path):
    ledger = Ledger(ledger_path)
    ledger.initialise(T0)
    os.unlink(ledger_path)
    ledger.require_intact()  # short-lived commands have no watch: nothing is asked
    ledger.close()


@pytest.mark.parametrize("position", [2, 3])
def test_an_event_edited_and_the_chain_recomputed_is_found(watched: Ledger, ledger_path: Path, position: int):
    watched.append([task_event(2)])  # position 3, written by this process
    _edit(ledger_path, position, b'"title":"task', b'"title":"TASK', recompute=True)
    watched.append([task_event(4)])  # docket's next write chains on from the forgery: it alone proves nothing
    assert f"position {3 if position == 3 else 2}" in _refused(watched, Code.LEDGER_REWRITTEN)


def test_an_event_edited_after_the_last_check_without_recomputing_breaks_the_chain(watched: Ledger, ledger_path: Path):
    watched.require_intact()
    other = Ledger(ledger_path)
    other.append([task_event(2)])
    other.close()
    _edit(ledger_path, 3, b'"title":"task', b'"title":"TASK', recompute=False)
    assert "position 3" in _refused(watched, Code.LEDGER_REWRITTEN)


def test_a_cut_tail_is_found(watched: Ledger, ledger_path: Path):
    watched.append([task_event(2), task_event(3)])
    with sqlite3.connect(ledger_path, timeout=30) as db:
        db.execute("DELETE FROM stored_events WHERE rowid = 4")
        db.execute("DELETE FROM chain WHERE position = 4")
    _refused(watched, Code.LEDGER_REWRITTEN)


def test_a_deleted_ledger_is_found(watched: Ledger, ledger_path: Path):
    for path in ledger_path.parent.glob("ledger.sqlite*"):
        path.unlink()
    assert "vanished" in _refused(watched, Code.LEDGER_VANISHED)


def test_a_replaced_ledger_is_found_even_when_it_is_a_copy_of_itself(watched: Ledger, ledger_path: Path):
    watched.append([task_event(2)])
    copy = ledger_path.with_name("copy.sqlite")
    with sqlite3.connect(ledger_path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    os.replace(copy, ledger_path)  # the same events, another file: docket no longer writes where it reads
    _refused(watched, Code.LEDGER_REPLACED)


def test_another_repositorys_ledger_swapped_in_is_found(watched: Ledger, ledger_path: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = Ledger(elsewhere / "ledger.sqlite")
    other.initialise(T0)
    other.close()
    shutil.copyfile(elsewhere / "ledger.sqlite", ledger_path.with_name("new.sqlite"))
    os.replace(ledger_path.with_name("new.sqlite"), ledger_path)
    _refused(watched, Code.LEDGER_REPLACED)



def test_the_watch_keeps_a_bounded_number_of_heads_and_still_finds_an_early_write_edited(watched: Ledger,
                                                                                         ledger_path: Path):
    """Was: one chain head kept per event written, for a whole run that never moved its target, each read again
    at the check: a thousand-task run kept 40,000 and grew docket go's memory. Every WRITES_PER_CHECK writes the
    heads are checked and let go; an edit of one of them is still found."""
    from docket.adapters.world.ledger.ledger_watch import WRITES_PER_CHECK

    for i in range(2, 2 + 3 * WRITES_PER_CHECK):
        watched.append([task_event(i)])
        assert len(watched.watch._written) < WRITES_PER_CHECK
    _edit(ledger_path, 5, b'"title":"task', b'"title":"TASK', recompute=True)
    watched.append([task_event(10_000)])
    assert "was rewritten during the run" in _refused(watched, Code.LEDGER_REWRITTEN)  # at the head last verified


def test_an_edit_a_check_made_while_writing_found_is_raised_by_every_later_check(watched: Ledger, ledger_path: Path):
    from docket.adapters.world.ledger.ledger_watch import WRITES_PER_CHECK

    watched.append([task_event(2)])  # position 3
    _edit(ledger_path, 3, b'"title":"task', b'"title":"TASK', recompute=True)
    for i in range(3, 3 + WRITES_PER_CHECK):  # the check made while writing finds the edit, and writing goes on
        watched.append([task_event(i)])
    for _ in range(2):
        assert "position 3" in _refused(watched, Code.LEDGER_REWRITTEN)


# The same watch over a PostgreSQL ledger: no file to swap, the chain checked through the reader port.

@pytest.fixture
def watched_database(ledger_path: Path, postgres_url: str):
    from docket.adapters.world.ledger.ledger_watch import watch_database

    ledger = Ledger(ledger_path, url=postgres_url)
    ledger.initialise(T0)
    ledger.append([task_event(1)])
    ledger.watch = watch_database(postgres_url)
    yield ledger
    ledger.close()


def _edit_database(url: str, position: int, old: bytes, new: bytes) -> None:
    """What someone with the database's password can do: change an event and recompute the chain from there."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        state = bytes(db.execute("SELECT state FROM stored_events WHERE notification_id = %s",
                                 (position,)).fetchone()[0])
        db.execute("UPDATE stored_events SET state = %s WHERE notification_id = %s",
                   (state.replace(old, new), position))
        digest = GENESIS_DIGEST
        for row in db.execute("SELECT notification_id, originator_id, originator_version, topic, state "
                              "FROM stored_events ORDER BY notification_id").fetchall():
            digest = next_digest(digest, chain_entry(row[0], row[1], row[2], row[3], bytes(row[4])))
            db.execute("UPDATE chain SET digest = %s WHERE position = %s", (digest, row[0]))


def test_on_postgres_what_other_writers_append_is_intact(watched_database: Ledger, ledger_path: Path,
                                                        postgres_url: str):
    watched_database.append([task_event(2)])
    other = Ledger(ledger_path, url=postgres_url)  # another machine's docket, on the same chain
    other.append([task_event(3)])
    other.close()
    watched_database.append([task_event(4)])
    watched_database.require_intact()
    assert watched_database.watch.check().position == 5


def test_on_postgres_an_event_edited_and_the_chain_recomputed_is_found(watched_database: Ledger,
                                                                       postgres_url: str):
    watched_database.append([task_event(2)])
    _edit_database(postgres_url, 2, b"task 1", b"task X")
    assert "was rewritten during the run" in _refused(watched_database, Code.LEDGER_REWRITTEN)


def test_on_postgres_a_cut_tail_is_found(watched_database: Ledger, postgres_url: str):
    import psycopg

    watched_database.append([task_event(2)])
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("DELETE FROM stored_events WHERE notification_id = 3")
        db.execute("DELETE FROM chain WHERE position = 3")
    _refused(watched_database, Code.LEDGER_REWRITTEN)
