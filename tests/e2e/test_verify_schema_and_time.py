"""`docket verify` also judges what the chain cannot see: the file's schema and the order of recorded times."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from docket.domain.kernel.canonical import canonical_json
from docket.domain.kernel.chain import chain_entry, next_digest

TIMES = [f"2026-01-01T00:0{minute}:00.000Z" for minute in range(6)]


@pytest.fixture
def ledger(docket):
    """A real ledger whose effector has tracked its intents: init, a run (intent and outcome), a task, a lease."""
    docket("init", now=TIMES[0])
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1", now=TIMES[1])
    docket("task", "plan", "r1", "--title", "t", "--id", "t1", now=TIMES[2])
    docket("worker", "register", "r1", "--role", "implementer", "--id", "w1", now=TIMES[3])
    docket("lease", "grant", "wt/a", "--worker", "w1", "--generation", "1", "--ttl", "10m", now=TIMES[4])
    with sqlite3.connect(docket.ledger) as conn:
        assert conn.execute("SELECT COUNT(*) FROM tracking").fetchone()[0] >= 1
    return docket.ledger


def failure(docket, code: str) -> str:
    result = docket("verify", check=False)
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    match = re.fullmatch(rf"docket: error: {code}: (.+)", line)
    assert match, line
    return match.group(1)


def test_a_fresh_ledger_and_one_in_use_verify(docket, ledger):
    assert docket("verify").returncode == 0


def test_query_planner_statistics_are_not_a_schema_change(docket, ledger):
    with sqlite3.connect(ledger) as conn:
        conn.execute("ANALYZE")
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone()
    assert docket("verify").returncode == 0


UNEXPECTED = {
    "trigger-on-events": ("CREATE TRIGGER hide_tasks AFTER INSERT ON stored_events WHEN NEW.topic = 'TaskPlanned.v1' "
                          "BEGIN DELETE FROM stored_events WHERE rowid = NEW.rowid; END", "trigger hide_tasks"),
    "trigger-on-tracking": ("CREATE TRIGGER freeze_effector AFTER UPDATE ON tracking "
                            "BEGIN UPDATE tracking SET notification_id = 999999; END", "trigger freeze_effector"),
    "table": ("CREATE TABLE notes (text TEXT)", "table notes"),
    "index": ("CREATE INDEX by_topic ON stored_events (topic)", "index by_topic"),
    "view": ("CREATE VIEW recent AS SELECT * FROM stored_events ORDER BY rowid DESC", "view recent"),
}


@pytest.mark.parametrize("sql, named", UNEXPECTED.values(), ids=UNEXPECTED.keys())
def test_an_unexpected_schema_object_fails_verification_naming_it(docket, ledger, sql, named):
    with sqlite3.connect(ledger) as conn:
        conn.execute(sql)
    assert named in failure(docket, "schema-mismatch")
    doc = docket("verify", "--json", check=False).json()
    assert doc["ok"] is False and doc["error"]["code"] == "schema-mismatch" and named in doc["error"]["message"]


def test_a_table_redefined_by_hand_fails_verification_naming_it(docket, ledger):
    with sqlite3.connect(ledger) as conn:  # the same rows, but digests may now be NULL
        conn.executescript("""
            CREATE TABLE chain_copy AS SELECT * FROM chain;
            DROP TABLE chain;
            CREATE TABLE chain (position INTEGER PRIMARY KEY, digest TEXT);
            INSERT INTO chain SELECT * FROM chain_copy;
            DROP TABLE chain_copy;
        """)
    assert "table chain" in failure(docket, "schema-mismatch")


def test_several_unexpected_objects_are_all_named(docket, ledger):
    with sqlite3.connect(ledger) as conn:
        conn.execute(UNEXPECTED["view"][0])
        conn.execute(UNEXPECTED["trigger-on-tracking"][0])
    message = failure(docket, "schema-mismatch")
    assert "view recent" in message and "trigger freeze_effector" in message


def test_a_recorded_time_rewritten_earlier_with_the_chain_recomputed_is_named(docket, ledger):
    position = 5  # TaskPlanned, recorded at TIMES[2]
    with sqlite3.connect(ledger) as conn:
        (state,) = conn.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()
        body = json.loads(state)
        assert body["recorded_at"] == TIMES[2]
        body["recorded_at"] = "1999-01-01T00:00:00.000Z"
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (canonical_json(body), position))
        digest = conn.execute("SELECT digest FROM chain WHERE position = ?", (position - 1,)).fetchone()[0]
        rows = conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
                            "WHERE rowid >= ? ORDER BY rowid", (position,)).fetchall()
        for row_position, stream, version, type_, row_state in rows:  # as a careful forger would
            digest = next_digest(digest, chain_entry(row_position, stream, version, type_, row_state))
            conn.execute("UPDATE chain SET digest = ? WHERE position = ?", (digest, row_position))
    message = failure(docket, "chain-broken")
    assert message.startswith(f"position {position}: ")
    assert "1999-01-01T00:00:00.000Z" in message and TIMES[1] in message
