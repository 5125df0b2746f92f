"""Tampering with the ledger file is caught by `docket verify`, which names the position."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.domain.events import TaskPlanned

T0 = "2026-01-01T00:00:00.000Z"
EVENTS = 12  # LedgerCreated + 11 tasks


@pytest.fixture
def ledger(docket):
    docket("init", now=T0)  # every event at T0: a forger below keeps time in order, as a careful one would
    ledger = Ledger(docket.ledger)
    for i in range(EVENTS - 1):
        ledger.append([TaskPlanned(stream=f"task:t{i}", version=1, recorded_at=T0, task_id=f"t{i}",
                                   run_id="r", title=f"task {i}")])
    ledger.close()
    assert docket("verify").returncode == 0
    return docket.ledger


def broken_at(docket, *args: str) -> int:
    result = docket("verify", *args, check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    match = re.fullmatch(r"docket: error: chain-broken: position (\d+): .+", lines[0])
    assert match, lines[0]
    return int(match.group(1))


def tamper(path, *statements: tuple) -> None:
    conn = sqlite3.connect(path)
    with conn:
        for sql, *params in statements:
            conn.execute(sql, params)
    conn.close()


@pytest.mark.parametrize("position", [1, 5, EVENTS])
def test_one_flipped_byte_of_a_stored_event(docket, ledger, position):
    conn = sqlite3.connect(ledger)
    (state,) = conn.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()
    conn.close()
    flipped = bytearray(state)
    flipped[len(flipped) // 2] ^= 0x01
    tamper(ledger, ("UPDATE stored_events SET state = ? WHERE rowid = ?", bytes(flipped), position))
    assert broken_at(docket) == position


@pytest.mark.parametrize("column, value", [("originator_id", "task:other"), ("originator_version", 7),
                                           ("topic", "RunCompleted.v1")])
def test_a_changed_column(docket, ledger, column, value):
    tamper(ledger, (f"UPDATE stored_events SET {column} = ? WHERE rowid = 6", value))
    assert broken_at(docket) == 6


@pytest.mark.parametrize("position", [2, 7])
def test_a_deleted_row(docket, ledger, position):
    tamper(ledger, ("DELETE FROM stored_events WHERE rowid = ?", position))
    assert broken_at(docket) == position


def test_a_deleted_digest(docket, ledger):
    tamper(ledger, ("DELETE FROM chain WHERE position = 4",))
    assert broken_at(docket) == 4


def test_two_swapped_rows(docket, ledger):
    conn = sqlite3.connect(ledger)
    a = conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events WHERE rowid=3").fetchone()
    b = conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events WHERE rowid=8").fetchone()
    with conn:
        conn.execute("DELETE FROM stored_events WHERE rowid IN (3, 8)")
        conn.execute("INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
                     "VALUES (3, ?, ?, ?, ?)", b)
        conn.execute("INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
                     "VALUES (8, ?, ?, ?, ?)", a)
    conn.close()
    assert broken_at(docket) == 3


def _forged_row(i: int) -> tuple:
    state = json.dumps({"payload": {"run_id": "r", "task_id": f"x{i}", "title": "forged"},
                        "recorded_at": T0}, sort_keys=True, separators=(",", ":")).encode()
    return (f"task:x{i}", 1, "TaskPlanned.v1", state)


def test_a_row_inserted_in_the_middle(docket, ledger):
    conn = sqlite3.connect(ledger)
    with conn:
        for position in range(EVENTS, 4, -1):  # make room at position 5
            conn.execute("UPDATE stored_events SET rowid = rowid + 1 WHERE rowid = ?", (position,))
        conn.execute("INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
                     "VALUES (5, ?, ?, ?, ?)", _forged_row(1))
    conn.close()
    assert broken_at(docket) == 5


def test_a_row_appended_without_a_digest(docket, ledger):
    tamper(ledger, ("INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
                    "VALUES (?, ?, ?, ?, ?)", EVENTS + 1, *_forged_row(2)))
    assert broken_at(docket) == EVENTS + 1


def test_a_truncated_tail_is_caught_with_an_anchor(docket, ledger, tmp_path):
    anchor = tmp_path / "anchor.json"
    anchor.write_text(docket("verify", "--json").stdout)
    tamper(ledger, ("DELETE FROM stored_events WHERE rowid > ?", EVENTS - 3),
           ("DELETE FROM chain WHERE position > ?", EVENTS - 3))
    assert docket("verify").returncode == 0  # a clean cut is invisible without an anchor...
    assert broken_at(docket, "--anchor", str(anchor)) == EVENTS - 2  # ...and named with one


def test_events_cut_but_digests_left_behind(docket, ledger):
    tamper(ledger, ("DELETE FROM stored_events WHERE rowid > ?", EVENTS - 2))
    assert broken_at(docket) == EVENTS - 1


def test_a_rewritten_chain_differs_from_the_anchor(docket, ledger, tmp_path):
    anchor = tmp_path / "anchor.json"
    anchor.write_text(docket("verify", "--json").stdout)
    # Rewrite event 5 and recompute every digest after it, as a careful forger would.
    from docket.domain.kernel.chain import chain_entry, next_digest

    conn = sqlite3.connect(ledger)
    with conn:
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = 5", (_forged_row(3)[3],))
        digest = conn.execute("SELECT digest FROM chain WHERE position = 4").fetchone()[0]
        rows = conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                            "WHERE rowid >= 5 ORDER BY rowid").fetchall()
        for position, stream, version, type_, state in rows:
            digest = next_digest(digest, chain_entry(position, stream, version, type_, state))
            conn.execute("UPDATE chain SET digest = ? WHERE position = ?", (digest, position))
    conn.close()
    assert docket("verify").returncode == 0
    assert broken_at(docket, "--anchor", str(anchor)) == EVENTS


def test_a_replaced_genesis_event(docket, ledger):
    tamper(ledger, ("UPDATE stored_events SET topic = 'TaskPlanned.v1' WHERE rowid = 1",))
    assert broken_at(docket) == 1


def test_verify_json_reports_the_head_as_an_anchor(docket, ledger):
    doc = docket("verify", "--json").json()
    assert doc["ok"] is True and doc["events"] == EVENTS and doc["head"]["position"] == EVENTS
    assert re.fullmatch(r"[0-9a-f]{64}", doc["head"]["digest"])
